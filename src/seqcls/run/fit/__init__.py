"""The callbacks that shape a fit: how long it trains, which validations it runs, what it logs.

``recipe`` derives the length of training from the data; ``final_validation`` measures the
final weights, ``cut_validation`` runs again a validation that a stop cut short,
``no_steps_left`` handles a fit resumed with nothing left to train, and ``validation_off`` one
that validates nothing; ``throughput`` logs samples and tokens per second; ``xla_graphs``
keeps an XLA run's evaluation graphs the same from one validation to the next.
"""
