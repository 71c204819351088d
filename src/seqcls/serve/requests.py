"""A prediction request's body, checked: Vertex AI's ``{"instances": [...], "parameters": {...}}``.

Each instance is a text, or ``{"text": ..., "text_pair": ...}`` for a model of text pairs.
Every mistake is a ``RequestError``: an HTTP status (4xx) and one line naming the instance
or key at fault, which the server returns as ``{"error": LINE}``.
"""

import json
from typing import Any

from seqcls.serve.predictions import Row

INSTANCE_KEYS = ("text", "text_pair")
JSON_TYPES = {bool: "boolean", int: "number", float: "number", list: "array", dict: "object"}


class RequestError(Exception):
    """A request the server refuses: ``status`` (4xx) and a one-line ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def parse_request(body: bytes, *, max_instances: int, windows: bool = False) -> list[Row]:
    """The rows a request body asks for, in order; ``windows``: the model reads long texts as
    windows, which cannot split a pair."""
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RequestError(400, f"the body is not JSON ({error})") from None
    if not isinstance(document, dict):
        raise RequestError(400, 'the body must be a JSON object: {"instances": [...]}')
    unknown = sorted(set(document) - {"instances", "parameters"})
    if unknown:
        raise RequestError(400, f"unknown key {unknown[0]!r}; a request has instances, parameters")
    parameters = document.get("parameters", {})
    if not isinstance(parameters, dict):
        raise RequestError(400, "parameters must be a JSON object")
    if parameters:
        raise RequestError(400, f"parameters.{next(iter(parameters))}: unknown; none are taken")
    instances = document.get("instances")
    if not isinstance(instances, list) or not instances:
        raise RequestError(400, 'no instances: send {"instances": ["a text", ...]}')
    if len(instances) > max_instances:
        raise RequestError(
            413, f"{len(instances)} instances; at most {max_instances} per request, send several"
        )
    return [parse_instance(index, instance, windows) for index, instance in enumerate(instances)]


def parse_instance(index: int, instance: Any, windows: bool) -> Row:
    where = f"instances[{index}]"
    if isinstance(instance, str):
        return _text(where, instance), None
    if not isinstance(instance, dict):
        raise RequestError(
            400,
            f'{where}: {json_type(instance)}; give a string or {{"text": ..., "text_pair": ...}}',
        )
    unknown = sorted(set(instance) - set(INSTANCE_KEYS))
    if unknown or "text" not in instance:
        problem = f"unknown key {unknown[0]!r}" if unknown else "no text"
        raise RequestError(400, f"{where}: {problem}; an instance has text and maybe text_pair")
    text = _text(f"{where}.text", instance["text"])
    if instance.get("text_pair") is None:
        return text, None
    if windows:
        raise RequestError(
            400, f"{where}.text_pair: this model reads long texts as windows, which take no pairs"
        )
    return text, _text(f"{where}.text_pair", instance["text_pair"])


def _text(where: str, value: Any) -> str:
    if not isinstance(value, str):
        raise RequestError(400, f"{where}: {json_type(value)}; give a string")
    if not value.strip():
        raise RequestError(400, f"{where}: an empty text; give at least one word")
    return value


def json_type(value: Any) -> str:
    """A value's JSON type, as the client wrote it: ``a number``, ``null``."""
    return f"a JSON {JSON_TYPES[type(value)]}" if type(value) in JSON_TYPES else "null"
