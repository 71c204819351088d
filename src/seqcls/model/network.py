"""The network a classifier trains, built from its options, and what each option resolved to.

The pretrained model with its label layer (``label_layer.py``); its top layers drawn afresh
(``layers.py``); its head's input, the first token or the mean (``mean_pooling.py``), or a
pair head over both texts encoded apart (``pair_encoding.py``); and the peak learning rates
that follow (``optimization.py``). Each default is resolved once, here, and returned as what
trained, for the checkpoint and the model card.
"""

from dataclasses import dataclass
from typing import Any

from transformers import PreTrainedModel

from seqcls.data.labels import LabelSpace
from seqcls.data.pair_batches import PairEncoding
from seqcls.model.label_layer import Source, load_classifier
from seqcls.model.layers import reinitialise_top_layers, resolve_reinit_layers
from seqcls.model.mean_pooling import Pooling, resolve_pooling, set_up_head_input
from seqcls.model.optimization import peak_learning_rates
from seqcls.model.pair_encoding import PairSetup, set_up_pair_encoding
from seqcls.model.pretrained import reads_both_ways


@dataclass(frozen=True)
class Network:
    """A built network. ``head_source``: where its head's weights came from (``new``: an
    untrained head, which only a fit or a checkpoint makes useful); ``pairs``: its pair head,
    where pairs are encoded apart; ``resolved``: the options it resolved, by name."""

    model: PreTrainedModel
    head_source: Source
    pairs: PairSetup | None
    resolved: dict[str, Any]


def build_network(
    model_name_or_path: str,
    labels: LabelSpace,
    *,
    dropout: float | None,
    rdrop: bool,
    gradient_checkpointing: bool,
    reinit_layers: int | None,
    learning_rate: float | None,
    head_learning_rate: float | None,
    pooling: Pooling | None,
    last_layer_first_token_only: bool | None,
    pair_encoding: PairEncoding | None,
) -> Network:
    """The network ``SequenceClassifier``'s options of the same names describe; ``rdrop``:
    whether R-Drop trains it, which needs dropout's masks."""
    if dropout is None and not rdrop:
        dropout = 0.0
    model, plan = load_classifier(
        model_name_or_path, labels, gradient_checkpointing=gradient_checkpointing, dropout=dropout
    )
    # Resolved once, here: whether the head reads the first token decides the default
    # below. Pairs read apart take their pooling from set_up_pair_encoding.
    head_pooling = (
        resolve_pooling(model, model_name_or_path, pooling) if pair_encoding != "separate" else None
    )
    reinit_layers = resolve_reinit_layers(
        model,
        reinit_layers,
        fresh_head=not plan.checkpoint_head,
        # A decoder's head reads a row's last token, not an encoder's [CLS].
        first_token_head=head_pooling == "first_token" and reads_both_ways(model),
    )
    reinitialise_top_layers(model, reinit_layers)
    rates = peak_learning_rates(
        labels.problem_type, learning_rate, head_learning_rate, reinit_layers
    )
    pairs = set_up_pair_encoding(
        model, model_name_or_path, pair_encoding, pooling, last_layer_first_token_only
    )
    head_source: Source
    if pairs is not None:
        chosen, head_source = pairs.pooling, pairs.head_source
    else:
        chosen = set_up_head_input(
            model, model_name_or_path, head_pooling, last_layer_first_token_only
        )
        head_source = plan.source
    resolved = {"reinit_layers": reinit_layers, **rates._asdict(), "pooling": chosen}
    if dropout is not None:
        resolved["dropout"] = dropout
    return Network(model, head_source, pairs, resolved)
