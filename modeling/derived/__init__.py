"""Derived (what-if) devices: arrays and fabrics computed from a member's or local device's model.

``raid`` and ``fabric`` hold the laws, ``curve`` reads the base device's closed-loop curve,
``spec`` the stored JSON definition, ``calibrate`` the correction learned from K measured
points, ``model`` the predicting object and ``store`` the catalog glue.
"""
