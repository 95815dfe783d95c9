"""The web page (``gpuscale serve``) through Flask's test client: its answers are the API's, bad
input is one message on the page, downloads are the report and the API's exports, and nothing
typed reaches the file system."""

from __future__ import annotations

import html
import io
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

from gpuscale import api
from gpuscale.api.export import TARGETS
from gpuscale.api.page import model_from_config_text
from gpuscale.api.serving_search import search
from gpuscale.errors import InputError
from gpuscale.report.serving import band_lines
from gpuscale.web import answers
from gpuscale.web.app import create_app

TRAIN = {"model": "llama3.1-8b", "gpu": "h100-sxm", "inter": "ib-ndr400", "gpus": "64"}
LLAMA_CONFIG = {
    "model_type": "llama",
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 16,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
}


@pytest.fixture(scope="module")
def client() -> Any:
    return create_app().test_client()


def _by_id(page: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</', page, re.S)
    assert found, f"no #{element_id} on the page"
    return html.unescape(found.group(1)).strip()


def _post(client: Any, path: str, data: dict[str, str]) -> tuple[int, str]:
    response = client.post(path, data=data)
    return response.status_code, response.get_data(as_text=True)


def test_empty_form_lists_the_catalog(client: Any) -> None:
    page = client.get("/").get_data(as_text=True)
    for row in api.catalog_listing("models").rows[:3]:
        assert f'value="{row.id}"' in page
    assert 'value="h100-sxm" selected' in page
    assert 'value="nvlink4"' not in page, "fabrics are the links between nodes only"
    assert 'id="verdict"' not in page and 'id="error"' not in page


def test_training_answer_is_the_apis(client: Any) -> None:
    status, page = _post(client, "/", TRAIN)
    assert status == 200
    planned = api.plan("llama3.1-8b", gpu="h100-sxm", gpus=64, inter="ib-ndr400")
    scaled = api.scale("llama3.1-8b", gpu="h100-sxm", max_gpus=64, inter="ib-ndr400")
    fitted = api.fit("llama3.1-8b", gpu="h100-sxm")
    verdict = planned.to_dict()["verdict"]
    assert _by_id(page, "verdict") == f"{verdict['choice']}: {verdict['reason']}"
    assert fitted.verdict in html.unescape(page)
    plans = planned.to_dict()["plans"]
    for row in plans:
        assert html.escape(row["description"]) in page
    assert page.count("<tr>") == len(plans) + 1
    # every figure of the three answers is drawn, by plotly.js served from the page itself
    figures = len(fitted.figures()) + len(planned.figures()) + len(scaled.figures())
    assert figures >= 3 and page.count("Plotly.newPlot(") == figures
    assert '<script src="/plotly.min.js">' in page
    assert not re.search(r"""src=["']?https?:""", page), "nothing is fetched from a network"


def test_plotly_js_is_served_locally(client: Any) -> None:
    response = client.get("/plotly.min.js")
    assert response.status_code == 200 and response.mimetype == "application/javascript"
    assert b"newPlot" in response.data and len(response.data) > 1_000_000


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("gpus", "abc", "GPU count: 'abc' is not a whole number"),
        ("gpus", "0", "GPU count: must be 1 to 16,384, got 0"),
        ("gpus", "999999", "GPU count: must be 1 to 16,384, got 999,999"),
        ("gpu", "h100", "GPU: unknown gpu 'h100'; did you mean"),
        ("inter", "nvlink4", "Fabric: unknown fabric 'nvlink4'"),
        ("seq", "-5", "Sequence length: must be 1 to"),
        ("model", "llama-9000", "Model: unknown model 'llama-9000'"),
        ("config", "{not json", "config.json: the pasted config.json is not valid JSON"),
        ("config", '{"model_type": "llama"}', "config.json: pasted-config:"),
    ],
)
def test_bad_input_is_one_message_on_the_page(
    client: Any, field: str, value: str, message: str
) -> None:
    status, page = _post(client, "/", {**TRAIN, field: value})
    assert status == 400
    assert _by_id(page, "error").startswith(message)
    assert "Traceback" not in page and 'id="verdict"' not in page
    # the form keeps what was typed, so it can be corrected
    assert value in html.unescape(page) or field in ("gpu", "inter", "model")


def test_no_plan_on_the_gpus_still_answers_the_fit(client: Any) -> None:
    status, page = _post(client, "/", {**TRAIN, "model": "llama3.1-405b", "gpus": "1"})
    assert status == 200
    assert _by_id(page, "verdict").startswith("no plan fits llama3.1-405b on 1 x h100-sxm")
    assert api.fit("llama3.1-405b", gpu="h100-sxm").verdict in html.unescape(page)
    assert 'id="plans"' not in page and 'id="export-' not in page


def test_a_typed_path_never_reaches_the_file_system(client: Any, tmp_path: Path) -> None:
    # catalog.model() would read this file; the page takes catalog ids only
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA_CONFIG))
    status, page = _post(client, "/", {**TRAIN, "model": str(config)})
    assert status == 400 and _by_id(page, "error").startswith("Model: unknown model")
    status, page = _post(client, "/", {**TRAIN, "model": str(tmp_path)})
    assert status == 400 and _by_id(page, "error").startswith("Model: unknown model")


def test_multipart_posts_are_refused_before_parsing(client: Any) -> None:
    response = client.post(
        "/",
        data={**TRAIN, "config": (io.BytesIO(json.dumps(LLAMA_CONFIG).encode()), "config.json")},
        content_type="multipart/form-data",
    )
    assert response.status_code == 415


def test_pasted_config_is_read_in_memory(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_files(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"the page touched the file system: {args}")

    monkeypatch.setattr("gpuscale.files.read_text", no_files)
    form = {**TRAIN, "gpus": "8", "config": json.dumps(LLAMA_CONFIG)}
    status, page = _post(client, "/", form)
    assert status == 200, _by_id(page, "error")
    spec = model_from_config_text(json.dumps(LLAMA_CONFIG))
    planned = api.plan(spec, gpu="h100-sxm", gpus=8, inter="ib-ndr400")
    verdict = planned.to_dict()["verdict"]
    assert _by_id(page, "verdict") == f"{verdict['choice']}: {verdict['reason']}"
    # exports of a pasted model go through the API with the spec (its name is no catalog id)
    response = client.post("/export/deepspeed", data=form)
    assert response.status_code == 200
    expected = api.export_plan(planned.to_dict(), to="deepspeed", model=spec)
    assert response.get_data(as_text=True) == expected.export.files[0].content


def test_every_export_downloads_or_says_why_not(client: Any) -> None:
    _, page = _post(client, "/", TRAIN)
    doc = api.plan("llama3.1-8b", gpu="h100-sxm", gpus=64, inter="ib-ndr400").to_dict()
    downloaded = 0
    for target in TARGETS:
        try:
            expected = api.export_plan(doc, to=target)
        except InputError as exc:
            assert str(exc) in _by_id(page, f"refused-{target}")
            status, refused = _post(client, f"/export/{target}", TRAIN)
            assert status == 400 and str(exc) in _by_id(refused, "error")
            continue
        assert f'id="export-{target}"' in page
        response = client.post(f"/export/{target}", data=TRAIN)
        assert response.status_code == 200
        name = response.headers["Content-Disposition"].split("filename=")[1].strip('"')
        files = expected.export.files
        if len(files) == 1:
            assert name == files[0].name
            assert response.get_data(as_text=True) == files[0].content
        else:
            archive = zipfile.ZipFile(io.BytesIO(response.data))
            assert name == f"gpuscale-{target}.zip"
            for item in files:
                info = archive.getinfo(f"gpuscale-{target}/{item.name}")
                assert archive.read(info).decode() == item.content
                assert bool(info.external_attr >> 16 & 0o100) == item.executable
        downloaded += 1
    assert downloaded >= 4
    status, page = _post(client, "/export/nonsense", TRAIN)
    assert status == 404 and "unknown export 'nonsense'" in _by_id(page, "error")


def test_report_download_is_self_contained(client: Any) -> None:
    response = client.post("/report.html", data=TRAIN)
    assert response.status_code == 200 and response.mimetype == "text/html"
    assert "attachment" in response.headers["Content-Disposition"]
    report = response.get_data(as_text=True)
    assert report.startswith("<!doctype html>")
    assert not re.search(r"""src=["']?https?:""", report)
    for title in ("Fit: Answer", "Plan: Answer", "Scale: Answer", "Plan: Figures"):
        assert f"<h2>{title}</h2>" in report


def test_serving_answer_is_the_apis(client: Any) -> None:
    form = {"model": "llama3.1-8b", "gpu": "h100-sxm", "gpus": "8", "concurrency": "32"}
    status, page = _post(client, "/serving", {**form, "slo_ttft_ms": "500", "slo_tpot_ms": "40"})
    assert status == 200
    load = api.infer("llama3.1-8b", gpu="h100-sxm", concurrency=32)
    best = search("llama3.1-8b", gpu="h100-sxm", gpus=8, slo_ttft_ms=500, slo_tpot_ms=40)
    assert _by_id(page, "verdict") == load.to_dict()["verdict"]
    assert _by_id(page, "best") == best.explanation()
    sweep = api.infer_sweep("llama3.1-8b", gpu="h100-sxm", concurrency=[1, 4, 16, 32, 64])
    assert page.count("Plotly.newPlot(") == len(load.figures()) + len(sweep.figures())
    assert _by_id(page, "sweep") == sweep.to_dict()["verdict"]
    # the error band in the CLI's words (report.serving.band_lines), each line a paragraph
    lines = band_lines(load.to_dict()["uncertainty"])
    assert lines and lines[0].startswith("error band from in-sample vllm")
    shown = [html.unescape(t) for t in re.findall(r'<p class="band">(.*?)</p>', page)]
    assert shown == lines
    status, page = _post(client, "/serving", {**form, "slo_tpot_ms": "fast"})
    assert status == 400 and _by_id(page, "error") == "TPOT p99 target (ms): 'fast' is not a number"
    response = client.post("/serving/report.html", data=form)
    assert response.status_code == 200 and b"Best deployment: Answer" in response.data


def test_a_bug_shows_no_trace(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(query: Any) -> Any:
        raise RuntimeError("secret detail of the bug")

    monkeypatch.setattr(answers, "training_answer", broken)
    status, page = _post(client, "/", TRAIN)
    assert status == 500
    assert _by_id(page, "error").startswith("internal error")
    assert "secret detail" not in page and "Traceback" not in page


def test_oversized_and_misdirected_requests_get_a_message(client: Any) -> None:
    status, page = _post(client, "/", {**TRAIN, "config": "x" * (3 * 1024 * 1024)})
    assert status == 413 and _by_id(page, "error").startswith("the form is over 2 MiB")
    response = client.get("/report.html")  # downloads are posted with the form's fields
    assert response.status_code == 405
    assert "Traceback" not in _by_id(response.get_data(as_text=True), "error")
    response = client.get("/nowhere")
    assert response.status_code == 404
    assert _by_id(response.get_data(as_text=True), "error") == "no page at /nowhere"


def test_serving_takes_a_pasted_config(client: Any) -> None:
    form = {"gpu": "h100-sxm", "gpus": "4", "concurrency": "8", "config": json.dumps(LLAMA_CONFIG)}
    status, page = _post(client, "/serving", form)
    assert status == 200, _by_id(page, "error")
    spec = model_from_config_text(json.dumps(LLAMA_CONFIG))
    assert (
        _by_id(page, "verdict")
        == api.infer(spec, gpu="h100-sxm", concurrency=8).to_dict()["verdict"]
    )


def test_serving_deployments_table_names_the_load_as_the_search_prices_it(client: Any) -> None:
    """The search prices its places under Poisson arrivals (``planner.serving.search.price``):
    the page's table shows the request rate and the mean number in flight, as the CLI table
    does (``report.serving.print_search``: req/s, in flight), never a closed loop's
    "concurrency"."""
    form = {"model": "llama3.1-8b", "gpu": "h100-sxm", "gpus": "2", "concurrency": "8"}
    status, page = _post(client, "/serving", {**form, "slo_ttft_ms": "500", "slo_tpot_ms": "30"})
    assert status == 200
    table = page.split('<table id="deployments">')[1].split("</table>")[0]
    heads = re.findall(r"<th>(.*?)</th>", table)
    assert "req/s" in heads and "in flight" in heads and "concurrency" not in heads
    best = search("llama3.1-8b", gpu="h100-sxm", gpus=2, slo_ttft_ms=500, slo_tpot_ms=30)
    top = best.to_dict()["options"][0]
    row = re.findall(r"<td[^>]*>(.*?)</td>", table.split("<tbody>")[1])[: len(heads)]
    cells = dict(zip(heads, row, strict=True))
    assert cells["in flight"] == str(top["mean_requests_in_flight"])
