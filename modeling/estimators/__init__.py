"""Estimators: scikit-learn regressors, their fast paths and their pickle-free serialisation."""
