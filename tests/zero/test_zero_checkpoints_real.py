"""Real DeepSpeed ZeRO stage 2 checkpoints: seqcls resumes from them and exports their weights."""

from pathlib import Path

import pytest
import torch
from lane import single_process_rendezvous
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from seqcls.model.classifier import SequenceClassifier
from seqcls.run.checkpoints.resume import start_point
from seqcls.run.checkpoints.zero import zero_checkpoint_problem
from seqcls.run.outputs.export import export_model

pytestmark = pytest.mark.deepspeed
deepspeed = pytest.importorskip(
    "deepspeed", reason="the deepspeed extra: bash scripts/test.sh --deepspeed"
)

CONFIG = "configs/trainer/deepspeed.yaml"
LABELS = ["no", "yes"]


@pytest.fixture(scope="module")
def zero_checkpoint(tiny_bert: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A ZeRO-2 folder checkpoint of a seqcls classifier after 3 AdamW steps, as Lightning
    saves it (tag ``checkpoint``, Lightning's state as client state), and the trained weights."""
    module = SequenceClassifier(str(tiny_bert), label_names=LABELS)
    config = {
        "train_micro_batch_size_per_gpu": 2,
        "zero_optimization": {"stage": 2},
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "torch_adam": True}},
    }
    with single_process_rendezvous():
        engine, *_ = deepspeed.initialize(
            model=module, model_parameters=module.parameters(), config=config
        )
        tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
        batch = dict(
            tokenizer(
                ["a short one", "and a longer second text"], padding=True, return_tensors="pt"
            )
        )
        batch["labels"] = torch.tensor([0, 1])
        for _ in range(3):
            engine.backward(engine(batch).loss)
            engine.step()
        folder = tmp_path_factory.mktemp("run") / "last.ckpt"
        lightning_state = {
            "epoch": 1,
            "global_step": 3,
            "loops": {},
            "hyper_parameters": {"model_name_or_path": str(tiny_bert)},
        }
        engine.save_checkpoint(str(folder), client_state=lightning_state, tag="checkpoint")
    trained = {k: v.detach().clone() for k, v in module.model.state_dict().items()}
    return folder, trained


def test_a_real_zero_folder_is_complete_and_resumable(zero_checkpoint: tuple[Path, dict]) -> None:
    folder, _ = zero_checkpoint
    problem, state = zero_checkpoint_problem(str(folder))
    assert problem is None
    assert (state["epoch"], state["global_step"]) == (1, 3)
    start = start_point(None, str(folder.parent), folder.parent / "downloads", automatic=True)
    assert (start.source, start.epoch) == (str(folder), 1)


def test_model_export_gathers_the_fp32_weights_of_a_real_zero_folder(
    zero_checkpoint: tuple[Path, dict], tiny_bert: Path, tmp_path: Path
) -> None:
    folder, trained = zero_checkpoint
    fresh = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=2)
    out = export_model(
        fresh,
        AutoTokenizer.from_pretrained(tiny_bert),
        tmp_path / "model",
        checkpoint_path=str(folder),
    )
    exported = AutoModelForSequenceClassification.from_pretrained(out).state_dict()
    changed = 0
    for key, value in trained.items():
        torch.testing.assert_close(exported[key], value, msg=key)
        changed += not torch.equal(value, fresh.state_dict()[key])
    assert changed > len(trained) // 2  # the weights trained, so the export is not the base


def test_deepspeed_yaml_passes_deepspeeds_own_checker() -> None:
    import yaml
    from deepspeed.runtime.config import DeepSpeedConfig
    from pytorch_lightning.strategies import DeepSpeedStrategy

    init_args = yaml.safe_load(Path(CONFIG).read_text())["trainer"]["strategy"]["init_args"]
    strategy = DeepSpeedStrategy(**init_args)
    # Lightning adds the batch keys when training starts, from the data module.
    config = {**strategy.config, "train_micro_batch_size_per_gpu": 16, "bf16": {"enabled": True}}
    checked = DeepSpeedConfig(config)
    assert checked.zero_optimization_stage == 2
    assert checked.zero_enabled
