"""Measurement CSVs: nonsense rows are refused with the file, row and field named; good files load."""

from __future__ import annotations

from pathlib import Path

import pytest

from infercast.errors import InfercastError
from infercast.records.readers import load_records, read_records
from infercast.records.record import FIELDS, Record, write_records

PUBLISHED = Path(__file__).resolve().parents[1] / "data" / "measurements" / "published" / "reference.csv"


def _csv(tmp_path: Path, header: str, *rows: str) -> Path:
    path = tmp_path / "m.csv"
    path.write_text("# a comment line\n" + "\n".join([header, *rows]) + "\n")
    return path


def test_published_file_loads_with_rows_located() -> None:
    records = read_records(PUBLISHED)
    assert len(records) == 43
    assert records[0].origin == f"{PUBLISHED}:3"  # line 1 is a comment, line 2 the header
    assert {r.kind for r in records} >= {"static_throughput", "ttft", "op", "gemm", "hbm_copy", "serving_tpot"}


@pytest.mark.parametrize(
    "header,row,needle",
    [
        (
            "kind,model,gpu,input_length,value",
            "ttft,m,h100-sxm,128,0.01",
            "unknown column 'input_length' (did you mean 'input_len'?)",
        ),
        ("kind,model,gpu,input_len,value", "ttft,m,h100-sxm,128,inf", "value: must be a finite number > 0"),
        ("kind,model,gpu,input_len,value", "ttft,m,h100-sxm,128,nan", "value: must be a finite"),
        ("kind,model,gpu,input_len,value", "ttft,m,h100-sxm,128,-1", "value: must be a finite number > 0"),
        ("kind,model,gpu,batch,input_len,value", "ttft,m,h100-sxm,0,128,0.01", "batch: must be an integer >= 1"),
        ("kind,model,gpu,batch,input_len,value", "ttft,m,h100-sxm,-4,128,0.01", "batch: must be an integer >= 1"),
        ("kind,model,gpu,batch,input_len,value", "ttft,m,h100-sxm,1.7,128,0.01", "batch: must be an integer"),
        ("kind,model,gpu,input_len,layers,value", "ttft,m,h100-sxm,128,-3,0.01", "layers: must be an integer >= 0"),
        ("kind,model,gpu,input_len,value", "ttft,m,h100-sxm,0,0.01", "input_len: must be an integer >= 1"),
        ("kind,model,gpu,input_len,output_len,value", "tpot,llama-3.1-8b,h100-sxm,128,0,0.01", "output_len"),
        (
            "kind,model,gpu,input_len,output_len,value,unit",
            "static_throughput,llama-3.1-8b,h100-sxm,128,0,900,tok/s",
            "output_len",
        ),
        ("kind,gpu,m,n,k,value", "gemm,h100-sxm,0,0,0,0.01", "m: must be an integer >= 1"),
        (
            "kind,model,gpu,input_len,value,unit",
            "ttft,m,h100-sxm,128,900,tok/s",
            "unit 'tok/s' is not allowed for ttft; allowed: s, ms, us",
        ),
        (
            "kind,model,gpu,batch,input_len,output_len,value,unit",
            "static_throughput,m,h100-sxm,8,128,128,1.5,s",
            "allowed: tok/s",
        ),
        ("kind,model,input_len,value", "ttft,llama-3.1-8b,128,0.01", "gpu: is required"),
        ("kind,gpu,input_len,value", "ttft,h100-sxm,128,0.01", "model: is required"),
        ("kind,model,gpu,op,value", "op,llama-3.1-8b,h100-sxm,attention_prefill,0.01", "input_len"),
        ("kind,model,gpu,op,batch,value", "op,llama-3.1-8b,h100-sxm,attention_decode,8,0.01", "context"),
        ("kind,gpu,value", "hbm_copy,h100-sxm,0.01", "bytes: must be a finite number > 0"),
        ("kind,gpu,op,value", "launch_overhead,h100-sxm,graph,0.01", "unknown launch variant"),
        ("kind,value", "prefil_step,1", "unknown kind 'prefil_step'; did you mean prefill_step"),
        ("kind,model,gpu,input_len,tp,value", "ttft,m,h100-sxm,128,0,0.01", "tp: must be an integer >= 1"),
    ],
)
def test_nonsense_rows_are_refused_naming_row_and_field(tmp_path: Path, header: str, row: str, needle: str) -> None:
    path = _csv(tmp_path, header, row)
    with pytest.raises(InfercastError) as info:
        read_records(path)
    message = str(info.value)
    line = 2 if "column" in needle else 3  # the header, or the row
    assert f"{path}:{line}: " in message and needle in message, message
    assert "\n" not in message


def test_non_utf8_and_odd_files_are_user_errors(tmp_path: Path) -> None:
    latin = tmp_path / "latin1.csv"
    latin.write_bytes("kind,value,notes\nttft,1,caf\xe9\n".encode("latin-1"))
    with pytest.raises(InfercastError, match=r"latin1\.csv is not a UTF-8 text CSV"):
        read_records(latin)
    with pytest.raises(InfercastError, match="cannot read"):
        read_records(tmp_path)  # a folder
    with pytest.raises(InfercastError, match="no such file"):
        read_records(tmp_path / "missing.csv")
    empty = tmp_path / "sub"
    empty.mkdir()
    with pytest.raises(InfercastError, match="no measurement CSVs"):
        load_records([empty])


def test_written_records_read_back_equal_and_load_records_deduplicates(tmp_path: Path) -> None:
    rows = [
        Record(kind="decode_step", model="llama-3.1-8b", gpu="h100-sxm", batch=8, context=512, value=0.01),
        Record(kind="launch_overhead", gpu="h100-sxm", op="cuda_graph", value=2e-6),
    ]
    path = tmp_path / "deep" / "m.csv"
    write_records(path, rows, header_comment="line one\nline two")
    assert path.read_text().splitlines()[2].split(",") == FIELDS  # origin is not a column
    back = read_records(path)
    assert back == rows and back[1].origin == f"{path}:5"
    assert len(load_records([tmp_path, path])) == 2  # the folder holds the same file: read once


def test_unwritable_output_is_a_user_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a folder")
    with pytest.raises(InfercastError, match="cannot write") as info:
        write_records(blocker / "m.csv", [Record(kind="gemm", gpu="h100-sxm", m=1, n=1, k=1, value=1.0)])
    assert info.value.field == "out"


def test_one_registry_sniffs_and_reads_every_source_format(tmp_path: Path) -> None:
    """Each format has a name, a sniff and a reader: result files of the three benchmark tools, aiconfigurator's
    silicon rows and infercast's CSV are told apart by content; a file of none is refused naming the formats."""
    from infercast.records.bench_results import RunFacts
    from infercast.records.readers import READERS, read_measurements, sniff_format
    from tests.conftest import FIXTURES

    bench = FIXTURES / "bench"
    assert {f.name: sniff_format(f) for f in sorted(bench.iterdir())} == {
        "aiperf_profile_export_aiperf.csv": "aiperf",
        "aiperf_profile_export_aiperf.json": "aiperf",
        "guidellm_benchmarks.json": "guidellm",
        "vllm_bench_serve_llama-3.1-8b_c8.json": "vllm",
    }
    silicon = tmp_path / "silicon.csv"
    silicon.write_text("id,engine,model,gpu,precision,tp,input_len,output_len,concurrency,ttft_ms_mean,tpot_ms_mean\n")
    assert (
        sniff_format(silicon) == "silicon"
        and sniff_format(Path("data/measurements/published/reference.csv")) == "infercast"
    )
    assert set(READERS) == {"infercast", "silicon", "vllm", "guidellm", "aiperf"}
    recs = read_measurements(bench / "vllm_bench_serve_llama-3.1-8b_c8.json", RunFacts(gpu="h100-sxm", tp=1))
    assert {r.kind for r in recs} == {"serving_ttft", "serving_tpot", "serving_throughput"}
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(InfercastError, match="no format infercast reads; known: silicon"):
        read_measurements(other)
    with pytest.raises(InfercastError, match="format"):
        read_measurements(other, fmt="parquet")
