"""Training: model selection, fitting, the train operation, evaluation and adaptive sampling."""
