"""The columns an encoded row carries besides the tokenizer's own.

Every stage after encoding (selection, batching, the model, the outputs) names them from here.
"""

LABELS = "labels"  # the training target: a class id, a multi-hot vector or a float
INDEX = "index"  # the row's position in its input file, which keeps predictions in order
# The second text of a pair encoded on its own (--data.pair_encoding separate): its token ids
# and attention mask, beside the first text's input_ids and attention_mask.
PAIR_INPUT_IDS = "pair_input_ids"
PAIR_ATTENTION_MASK = "pair_attention_mask"
