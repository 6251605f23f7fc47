"""Trace prediction: the open-loop queue on a closed-loop curve, corrected by measured open-loop points."""
