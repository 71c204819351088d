"""The columns an encoded row carries besides the tokenizer's own.

Every stage after encoding (selection, batching, the model, the outputs) names them from here.
"""

LABELS = "labels"  # the training target: a class id, a multi-hot vector or a float
INDEX = "index"  # the row's position in its input file, which keeps predictions in order
