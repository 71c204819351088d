"""``seqcls --help`` says what seqcls is, lists every subcommand, and loads no Lightning."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pytorch_lightning.cli import LightningCLI

import seqcls
from seqcls.cli import HELP, SUBCOMMANDS, main
from seqcls.mlm.cli import MaskedLMCLI

HEAVY = ["pytorch_lightning", "lightning_fabric", "torch", "transformers", "datasets"]
# Runs --help in a fresh interpreter, then reports which heavy packages it imported.
PROBE = f"""
import json, sys
from seqcls.cli import main
main(["--help"])
print(json.dumps(sorted({{name.split(".")[0] for name in sys.modules}} & set({HEAVY!r}))))
"""


def test_help_lists_every_subcommand_without_importing_lightning() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    *shown, imported = done.stdout.splitlines()
    assert json.loads(imported) == []
    assert "\n".join(shown) + "\n" == HELP
    assert "fine-tunes Hugging Face sequence classifiers" in HELP
    for name in SUBCOMMANDS:
        assert f"\n  {name} " in HELP, name


def test_the_listing_matches_the_command_line_interfaces() -> None:
    classifier = set(LightningCLI.subcommands())
    assert set(SUBCOMMANDS) == classifier | {"mlm", "tune", "export", "serve"}
    mlm = "|".join(MaskedLMCLI.subcommands())
    assert f"seqcls mlm {mlm}" in SUBCOMMANDS["mlm"]


@pytest.mark.parametrize("doc", ["README.md", "docs/outputs.md"])
def test_the_docs_name_every_subcommand(doc: str) -> None:
    text = (Path(__file__).parents[2] / doc).read_text(encoding="utf-8")
    listing = re.search(r"`seqcls --help`[^.]*?lists its subcommands[^.]*\.", text, re.DOTALL)
    assert listing is not None, doc
    assert set(re.findall(r"`(\w+)`", listing.group(0))) == set(SUBCOMMANDS)


def test_version_and_a_mistyped_subcommand_answer_without_importing_lightning() -> None:
    probe = (
        "import json, sys\n"
        "from seqcls.cli import main\n"
        "main(['--version'])\n"
        "try:\n"
        "    main(['tun', '--tune.n_trials', '2'])\n"
        "except SystemExit as stop:\n"
        "    print('exit', stop.code)\n"
        f"print(json.dumps(sorted({{n.split('.')[0] for n in sys.modules}} & set({HEAVY!r}))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    version, status, imported = done.stdout.splitlines()
    assert version == f"seqcls {seqcls.__version__}"
    assert status == "exit 2"
    assert json.loads(imported) == []
    assert done.stderr.strip() == (
        "seqcls: error: tun: not a subcommand; did you mean tune? "
        "(one of fit, validate, test, predict, mlm, tune, export, serve; seqcls --help)"
    )


def test_no_subcommand_prints_the_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([])
    assert done.value.code == 2
    assert capsys.readouterr().err == HELP


def test_mlm_help_says_what_it_does(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["mlm", "--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    assert "seqcls mlm: continue masked-LM pretraining" in shown
    assert "Lightning Trainer command line tool" not in shown
    for name in MaskedLMCLI.subcommands():
        assert name in shown


@pytest.mark.parametrize(
    ("args", "usage"),
    [
        ([], "usage: seqcls mlm [-c CONFIG] {fit,validate,test} ..."),
        (["fit"], "usage: seqcls mlm [options] fit [-c CONFIG]"),
    ],
    ids=["mlm", "mlm-fit"],
)
def test_mlm_usage_names_the_mlm_command(
    args: list[str], usage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["mlm", *args, "--help"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(usage)


def test_an_mlm_mistake_points_to_mlm_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["mlm", "fit", "--trainer.max_epohcs", "2"])
    assert done.value.code == 2
    assert capsys.readouterr().err.strip().endswith("(seqcls mlm fit --help lists every option)")


def test_tune_help_lists_its_options(capsys: pytest.CaptureFixture[str]) -> None:
    main(["tune", "--help"])
    shown = capsys.readouterr().out
    assert "seqcls tune: search seqcls fit's flags with Optuna" in shown
    for option in ["space", "n_trials", "timeout", "metric", "prune", "seeds", "collect"]:
        assert f"--tune.{option}" in shown, option
    # Each option with what it does, read from TuneOptions' docstrings.
    words = " ".join(shown.split())
    assert "Trials in the study in all" in words
    assert "Search nothing: read the trial run directories in this folder" in words


def test_fit_help_says_the_recipe_decides_an_unset_length(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Lightning's own text says an unset length trains 1000 epochs.
    with pytest.raises(SystemExit) as done:
        main(["fit", "--help"])
    assert done.value.code == 0
    words = " ".join(capsys.readouterr().out.split())
    assert "unset, with --trainer.max_steps unset too, the recipe derives it" in words
    assert "defaults to ``max_epochs = 1000``" not in words


def test_fit_help_gives_each_checked_options_range(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    words = " ".join(capsys.readouterr().out.split())
    assert "defines it). 0: none. Range: [0, 1). (type: float, default: 0.0)" in words
    assert "Range: (0, inf)." in words  # the learning rate's
