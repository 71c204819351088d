"""Where a split's rows come from: a local or remote file, or a split of a hub dataset."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import datasets

from seqcls.data.labels import LabelSpace, ProblemType, infer_label_space, split_labels
from seqcls.data.tables import column_values, file_fingerprint, read_version, require_columns
from seqcls.errors import ConfigurationError

Split = Literal["train", "validation", "test", "predict"]


@dataclass(frozen=True)
class Source:
    """One split's rows. ``flag`` names the option that chose it, for error messages;
    ``cache_dir`` holds the local copy of a remote file (unset: seqcls's cache folder)."""

    flag: str
    path: str | None = None
    dataset_name: str | None = None
    dataset_config: str | None = None
    split: str | None = None
    cache_dir: Path | None = None

    @property
    def label(self) -> str:
        """How error messages and logs name this source."""
        if self.path:
            return self.path
        config = f"/{self.dataset_config}" if self.dataset_config else ""
        return f"{self.dataset_name}{config}[{self.split}]"

    def read(self) -> datasets.Dataset:
        return self.read_version()[0]

    def read_version(self) -> tuple[datasets.Dataset, str]:
        """The rows, and the version of them read (``fingerprint``): a cache keyed by it holds
        these rows, even where the file is rewritten meanwhile."""
        if self.path:
            # The label space and the encoder both need the training rows.
            return read_version(self.path, flag=self.flag, cache_dir=self.cache_dir)
        table = self._load_hub()
        return table, self._hub_version(table)

    def fingerprint(self) -> str:
        """Changes whenever the rows may have changed."""
        if self.path:
            return file_fingerprint(self.path, flag=self.flag)
        # datasets fingerprints a loaded split by its files; loading again is a cache hit.
        return self._hub_version(self._load_hub())

    def _hub_version(self, table: datasets.Dataset) -> str:
        return f"hub:{self.label}:{table._fingerprint}"

    def _load_hub(self) -> datasets.Dataset:
        try:
            table = datasets.load_dataset(self.dataset_name, self.dataset_config, split=self.split)
        except ValueError as error:  # an unknown split or config
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise ConfigurationError(f"{self.flag}: cannot load {self.label}: {first}") from None
        except (OSError, ConnectionError) as error:
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise ConfigurationError(
                f"{self.flag}: cannot load {self.label}: {first}; without network access, "
                "give local files with --data.train_file and friends"
            ) from None
        if not isinstance(table, datasets.Dataset):
            raise ConfigurationError(f"{self.flag}: {self.label} is not a single split")
        return table


@dataclass(frozen=True)
class SplitSources:
    """The sources of every split: files when any file is given, otherwise the hub dataset."""

    files: dict[Split, str | dict[str, str] | None]
    dataset_name: str | None
    dataset_config: str | None
    hub_splits: dict[Split, str | list[str] | None]
    cache_dir: Path | None = None

    @classmethod
    def from_arguments(
        cls, dataset_name: str | None, dataset_config: str | None, **arguments: Any
    ) -> "SplitSources":
        """From a data module's ``SPLIT_file``, ``SPLIT_split`` and ``cache_dir`` arguments;
        a split it does not take has none of either."""
        splits: tuple[Split, ...] = get_args(Split)
        cache_dir = arguments.get("cache_dir")
        return cls(
            files={split: arguments.get(f"{split}_file") for split in splits},
            dataset_name=dataset_name,
            dataset_config=dataset_config,
            hub_splits={split: arguments.get(f"{split}_split") for split in splits},
            cache_dir=Path(cache_dir) if cache_dir else None,
        )

    def __post_init__(self) -> None:
        if not self.use_files and self.dataset_name is None:
            raise ConfigurationError(
                "no data: pass the file the command reads (fit: --data.train_file, and "
                "--data.validation_file; validate: --data.validation_file; test: "
                "--data.test_file; predict: --data.predict_file), or a hub dataset with "
                "--data.dataset_name"
            )

    @property
    def use_files(self) -> bool:
        return any(self.files.values())

    def of(self, split: Split) -> list[Source]:
        if split == "validation":
            return [source for _, source in self.validation_sets() if source is not None]
        flag = f"--data.{split}_file"
        if self.use_files:
            path = self.files[split]
            if not isinstance(path, str):
                raise ConfigurationError(f"no {split} data: pass {flag}")
            return [Source(flag, path=path, cache_dir=self.cache_dir)]
        return [self._hub(f"--data.{split}_split", str(self.hub_splits[split]))]

    def has_train(self) -> bool:
        """Whether training rows are given: a training file, or a hub dataset's split."""
        return not self.use_files or isinstance(self.files["train"], str)

    def has_validation(self) -> bool:
        return any(source is not None for _, source in self.validation_sets())

    def validation_sets(self) -> list[tuple[str, Source | None]]:
        """(name, source) per validation set; ("", None) stands for rows held out of train.

        A single set has the empty name; several are named by their mapping keys, or by
        their hub split names without the ``validation_`` prefix (``matched``).
        """
        if self.use_files:
            flag = "--data.validation_file"
            files = self.files["validation"]
            if files is None:
                return [("", None)]
            if isinstance(files, str):
                return [("", Source(flag, path=files, cache_dir=self.cache_dir))]
            return [
                (key, Source(flag, path=path, cache_dir=self.cache_dir))
                for key, path in files.items()
            ]
        splits = self.hub_splits["validation"]
        if splits is None:
            return [("", None)]
        names = [splits] if isinstance(splits, str) else splits
        flag = "--data.validation_split"
        return [
            (name.removeprefix("validation_") if len(names) > 1 else "", self._hub(flag, name))
            for name in names
        ]

    def _hub(self, flag: str, split: str) -> Source:
        return Source(
            flag, dataset_name=self.dataset_name, dataset_config=self.dataset_config, split=split
        )


def read_label_space(
    source: Source,
    column: str,
    *,
    separator: str | None,
    names: list[str] | None,
    problem_type: ProblemType | None,
) -> LabelSpace:
    """The label space of a training source's label column: a hub dataset's class names, or
    what its values say (``labels.infer_label_space``), checked against any names given."""
    table = source.read()
    require_columns(table, {"label_column": column}, path=source.label)
    feature = table.features[column]
    if names is None and isinstance(feature, datasets.ClassLabel):
        names = feature.names
    return infer_label_space(
        split_labels(column_values(table, column), separator),
        where=f"{source.label}, column {column!r}",
        column=column,
        names=names,
        problem_type=problem_type,
    )
