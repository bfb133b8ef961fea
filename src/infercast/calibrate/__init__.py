"""From records to profiles: predict any record (:mod:`~infercast.calibrate.predict`), fit the cost model's
parameters (kernels, profile, load, harness) and validate predictions against measurements by group."""
