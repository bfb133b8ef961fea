"""Measurement records: one :class:`~infercast.records.record.Record` type and a reader per source format (the
project's CSV, ``vllm bench serve``/GuideLLM/AIPerf result files, aiconfigurator's silicon rows and kernel
tables). Sits just above :mod:`infercast.specs`: reading a measurement needs no cost model or simulator."""
