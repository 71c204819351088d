"""Checks once the command line is parsed, before anything is built: the trainer against the
hardware, XLA's limits, each numeric option's range, the length of a fit and the checkpoint
mode. A fit that holds out no validation row has its validation turned off here too, and a
``validate`` of it is refused."""

from jsonargparse import Namespace

from seqcls.errors import ConfigurationError
from seqcls.hardware import Hardware
from seqcls.option_ranges import check_option_ranges
from seqcls.run.checks.command_line import check_checkpoint_mode, check_trainer, check_trains
from seqcls.run.fit.validation_off import turn_off_validation
from seqcls.xla_options import check_xla_precision


def check_parsed(config: Namespace, subcommand: str | None) -> None:
    """Fail with one line on what the parsed ``config`` of ``subcommand`` shows is wrong."""
    check_lora_strategy(config)
    hardware = Hardware.detect()
    check_trainer(config.trainer, hardware)
    check_xla_precision(config.trainer, hardware)
    check_option_ranges(config)
    turn_off_validation(config, subcommand)
    if subcommand == "fit":
        check_trains(config.trainer)
    check_checkpoint_mode(config.checkpoint.mode)


def check_lora_strategy(config: Namespace) -> None:
    """LoRA's checkpoints hold the adapters and the head alone, and its export merges them into
    one copy of the model: both are built for whole copies (one process, DDP). A sharded
    strategy saves its own shards and would write the frozen base into every checkpoint."""
    rank = (config.get("model") or {}).get("lora_rank") or 0
    strategy = config.trainer.get("strategy")
    name = str(strategy if isinstance(strategy, str) else getattr(strategy, "class_path", ""))
    sharded = next((kind for kind in ("fsdp", "deepspeed") if kind in name.lower()), None)
    if rank and sharded:
        raise ConfigurationError(
            f"--model.lora_rank {rank} with --trainer.strategy {name}: LoRA's adapter-only "
            f"checkpoints and merged export need whole copies of the model; drop {sharded} "
            f"(configs/trainer/{sharded}.yaml or --trainer.strategy): the frozen base takes no "
            "optimizer state, so one GPU or DDP holds what sharding would save"
        )
