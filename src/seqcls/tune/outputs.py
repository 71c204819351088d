"""What a search leaves in its run directory besides the study.

- ``best.yaml``: the best trial's parameters as a config that stacks onto the same configs,
  ``seqcls fit --config ... --config RUN/best.yaml``;
- ``trials.csv`` and ``trials.md``: one row per trial (state, metric, parameters, run directory);
- ``importance.png``: how much each parameter moved the metric (Optuna's PED-ANOVA);
- ``logs/``: TensorBoard's HPARAMS view of every finished trial;
- ``seeds.md``: the best parameters re-run over several seeds, as mean ± std, and how many
  of those runs failed (no better than the majority class).
"""

import csv
import io
import logging
import math
import os
import posixpath
import statistics
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import optuna
import yaml
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from seqcls.cloud.storage import write_text
from seqcls.data.label_checks import is_number
from seqcls.run.outputs.metrics_file import validation_splits
from seqcls.run.report.failed_run import failed_in
from seqcls.tune.space import nested

log = logging.getLogger(__name__)
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)


def best_yaml(study: optuna.Study, metric: str, command: str, path: str) -> str | None:
    """The best complete trial's parameters as a stacking config, or None before there is one."""
    best = best_trial(study)
    if best is None:
        return None
    header = (
        f"# Best of {len(study.trials)} trial(s) of seqcls tune: {metric} = {best.value:.6g} "
        f"(trial {best.number}, {best.user_attrs.get('run_dir', '')}).\n"
        f"# Fit with them: {command} --config {path} --trainer.default_root_dir "
        f"{posixpath.join(posixpath.dirname(path), 'best')}\n"
    )
    return header + yaml.safe_dump(nested(best.params), sort_keys=False)


def best_trial(study: optuna.Study) -> FrozenTrial | None:
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        return None
    return study.best_trial


def trial_value(trial: FrozenTrial, direction: StudyDirection) -> float | None:
    """A trial's value, the best of its validations: Optuna gives a pruned trial its last."""
    reported = [value for value in trial.intermediate_values.values() if math.isfinite(value)]
    if trial.state != TrialState.PRUNED or not reported:
        return trial.value
    return min(reported) if direction == StudyDirection.MINIMIZE else max(reported)


def trial_rows(study: optuna.Study) -> tuple[list[str], list[list[str]]]:
    names = sorted({name for trial in study.trials for name in trial.params})
    header = ["trial", "state", "value", "best_step", *names, "run_dir"]
    values = [trial_value(trial, study.direction) for trial in study.trials]
    rows = [
        [
            str(trial.number),
            trial.state.name.lower(),
            "" if value is None else f"{value:.6g}",
            str(trial.user_attrs.get("best_step", "")),
            *[_cell(trial.params.get(name)) for name in names],
            str(trial.user_attrs.get("run_dir", "")),
        ]
        for trial, value in zip(study.trials, values, strict=True)
    ]
    return header, rows


def trials_csv(study: optuna.Study) -> str:
    header, rows = trial_rows(study)
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerows([header, *rows])
    return stream.getvalue()


def trials_markdown(study: optuna.Study, metric: str, direction: str) -> str:
    header, rows = trial_rows(study)
    header = [metric if name == "value" else name for name in header]
    lines = [
        f"# seqcls tune: {len(rows)} trial(s), {metric} ({direction}imize)",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *["| " + " | ".join(row) + " |" for row in rows],
    ]
    return "\n".join(lines) + "\n"


def importances(study: optuna.Study) -> dict[str, float]:
    """Each parameter's share of the metric's variation; empty with fewer than 3 complete trials."""
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    varied = set(study.best_trial.params) if complete else set()
    varied = {n for n in varied if len({str(t.params.get(n)) for t in complete}) > 1}
    if len(complete) < 3 or not varied:
        return {}
    evaluator = optuna.importance.PedAnovaImportanceEvaluator()
    try:
        with warnings.catch_warnings():  # equal importances when the trials tie: said by the plot
            warnings.simplefilter("ignore", UserWarning)
            found = optuna.importance.get_param_importances(study, evaluator=evaluator)
    except Exception as error:
        # Too few distinct values, choices Optuna cannot compare (a list, in a study from before
        # they were refused): the plot is a by-product, which must never stop the search.
        log.info("No parameter importances: %s: %s", type(error).__name__, error)
        return {}
    return {name: float(value) for name, value in found.items() if math.isfinite(value)}


def importance_picture(found: Mapping[str, float], metric: str, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    names = list(found)[::-1]
    figure = Figure(figsize=(6, 0.5 * len(names) + 1.2))
    axes = figure.subplots()
    axes.barh(names, [found[name] for name in names])
    axes.set_xlabel(f"importance for {metric} (PED-ANOVA)")
    figure.tight_layout()
    stream = io.BytesIO()
    figure.savefig(stream, format="png", dpi=100)
    _write_bytes(path, stream.getvalue())


def write_hparams(logs: Path, trial: FrozenTrial, metric: str, direction: StudyDirection) -> None:
    """One TensorBoard run per finished trial, with its parameters and its best metric."""
    value = trial_value(trial, direction)
    if value is None:
        return
    from torch.utils.tensorboard import SummaryWriter

    params = {name: _hparam(param) for name, param in trial.params.items()}
    with SummaryWriter(log_dir=str(logs / f"trial-{trial.number:03d}")) as writer:
        writer.add_hparams(params, {f"hparam/{metric}": value}, run_name=".")


def seeds_summary(
    results: Mapping[int, Mapping[str, float]], metric: str, trial_seed: int | None = None
) -> str:
    """Mean ± std (over seeds, n-1) of every validation metric, then one row per seed;
    ``trial_seed``: the seed the best trial ran with, which the seed runs leave out."""
    names = sorted({name for values in results.values() for name in values})
    lines = [
        f"# Best parameters over {len(results)} seed(s); the search's metric: {metric}",
        "",
    ]
    if trial_seed is not None:
        lines += [
            f"The best trial ran with seed {trial_seed}, which these runs leave out: the search "
            "picked the trial for what it scored with that seed.",
            "",
        ]
    lines += [
        "| metric | mean ± std | " + " | ".join(f"seed {s}" for s in results) + " |",
        "|---|---|" + "---|" * len(results),
    ]
    for name in names:
        values = [results[seed][name] for seed in results if name in results[seed]]
        spread = statistics.stdev(values) if len(values) > 1 else 0.0
        cells = [f"{results[s][name]:.4f}" if name in results[s] else "" for s in results]
        mean = statistics.fmean(values)
        lines.append(f"| {name} | {mean:.4f} ± {spread:.4f} | " + " | ".join(cells) + " |")
    # Judged as a fit's warning judges it; seed_values prefixes the metrics with "val/".
    verdicts = {seed: failed_in(values, "val/") for seed, values in results.items()}
    judged = {seed: did for seed, did in verdicts.items() if did is not None}
    if judged:
        failed = [str(seed) for seed, did in judged.items() if did]
        lines += [
            "",
            f"Failed runs, no better than the majority class: {len(failed)} of {len(judged)}"
            + (f" (seed {', '.join(failed)})" if failed else ""),
        ]
    return "\n".join(lines) + "\n"


def _hparam(value: Any) -> bool | int | float | str:
    return value if isinstance(value, bool | int | float | str) else str(value)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _write_bytes(path: str, data: bytes) -> None:
    from seqcls.cloud.storage import is_remote

    if is_remote(path):
        import fsspec

        with fsspec.open(path, "wb") as stream:
            stream.write(data)
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(data)


def write_all(
    study: optuna.Study, root: str, metric: str, direction: str, command: str
) -> list[str]:
    """Rewrite the search's outputs from the study; the names of the files written."""
    written = []
    path = os.path.join(root, "best.yaml")
    best = best_yaml(study, metric, command, path)
    if best is not None:
        write_text(path, best)
        written.append("best.yaml")
    write_text(os.path.join(root, "trials.csv"), trials_csv(study))
    write_text(os.path.join(root, "trials.md"), trials_markdown(study, metric, direction))
    written += ["trials.csv", "trials.md"]
    found = importances(study)
    if found:
        importance_picture(found, metric, os.path.join(root, "importance.png"))
        written.append("importance.png")
    return written


def seed_values(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The validation metrics of a run's metrics.json that are numbers, by their logged names."""
    found = validation_values(metrics)
    return {name: value for name, value in found.items() if value is not None}


def validation_values(metrics: Mapping[str, Any]) -> dict[str, float | None]:
    """Every validation metric of a run's metrics.json by the name it was logged as, None
    where it is not a number: ``validation`` holds ``val/NAME``, and with several validation
    sets ``validation_SET`` holds ``val_SET/NAME`` (the reverse of ``split_name``)."""
    found: dict[str, float | None] = {}
    for split, values in validation_splits(dict(metrics)).items():
        prefix = "val" + split.removeprefix("validation")
        for name, value in values.items():
            found[f"{prefix}/{name}"] = float(value) if is_number(value) else None
    return found
