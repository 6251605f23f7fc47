"""The physics every answer obeys, inside and outside the measured range.

Regression trees know nothing beyond their training data, and a feature that grows with
the request size or the queue depth lets them invent bandwidth the device never showed
(issue 13: a 1 MiB read predicted at 5x the measured bandwidth, p99 below the mean at
queue depth 512).  So the serving path (matrix and single-row alike: both run
:func:`~modeling.serving.physics.laws.extend_and_cap`) predicts an out-of-range workload
at the nearest measured load and size and extends it with laws a storage device cannot
break:

* beyond the largest outstanding I/O measured (queue depth x numjobs), IOPS follows
  ``X(L) = Xmax L / (L + K)`` (``K = 0``: it stays at the plateau) and the latencies grow
  by Little's law (L = IOPS x W);
* beyond the largest request size measured, latency grows as ``s0 + s`` (a fixed cost
  plus a transfer time; ``s0 = 0``: in proportion to the size, bandwidth at its plateau),
  so bandwidth approaches its asymptote instead of stopping at the last measured size;
  ``K`` and ``s0`` per mix are chosen at training by validation
  (:mod:`modeling.training.laws`), 0 where the plateau predicts better;
* a direction's bandwidth never exceeds what the device showed for that mix
  (:data:`~modeling.serving.physics.limits.BANDWIDTH_TOLERANCE` above its measured
  maximum); capping it lowers IOPS and raises latency by the same factor;
* the latency percentiles are ordered, p50 <= p90 <= p99 <= p99.9, and p99 >= mean;
* intervals widen with the distance from the measured range
  (:func:`~modeling.serving.physics.extrapolation.widen`).

:class:`~modeling.serving.physics.limits.PhysicsLimits` holds what the device showed
(saved with the model); :mod:`~modeling.serving.physics.extrapolation` pulls a workload
into the measured range and says how far out it was, :mod:`~modeling.serving.physics.ladder`
holds the load laws along queue depth.  The laws (:mod:`~modeling.serving.physics.laws`)
are written once for both paths: the matrix path calls them on arrays (one value per
workload), the single-row path on plain floats
(:func:`~modeling.serving.physics.laws.apply_physics_row`), with numpy's or Python's
``min`` and ``max``.
"""
