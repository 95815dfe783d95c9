"""The Flask app: two forms (training, serving), their answers, the report and export downloads.

Stateless: every answer is recomputed from the posted form (a query takes well under a second),
so a download carries the form's fields and nothing is stored between requests. Forms are read
as ``application/x-www-form-urlencoded`` only: Werkzeug parses those in memory (a multipart
upload may spill to a temporary file, so it is refused before it is parsed).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from flask import Flask, Response, render_template, request
from plotly.offline import get_plotlyjs
from werkzeug.exceptions import HTTPException

from gpuscale import __version__
from gpuscale.api.export import TARGETS
from gpuscale.api.page import network_fabrics
from gpuscale.errors import InputError
from gpuscale.web import answers, forms

MAX_FORM_BYTES = 2 * 1024 * 1024
"""A pasted config.json is a few KiB; the API refuses one over 1 MiB with a message."""


@cache
def _plotly_js() -> str:
    """plotly.js as bundled with the plotly package: served by the page itself, no CDN."""
    return str(get_plotlyjs())


def _figure_html(figure: Any) -> str:
    return str(
        figure.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False})
    )


def _number(value: Any) -> str:
    """Table cells: thousands grouped, four significant digits below a thousand."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "" if value is None else str(value)
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _attachment(name: str, body: bytes, mime: str) -> Response:
    response = Response(body, content_type=mime)
    response.headers["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


def create_app() -> Flask:
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = MAX_FORM_BYTES
    app.jinja_env.filters["number"] = _number

    def page(template: str, **context: Any) -> str:
        return render_template(
            template,
            version=__version__,
            models=forms.model_ids(),
            gpus=forms.gpu_ids(),
            fabrics=network_fabrics(),
            labels=forms.LABELS,
            figure_html=_figure_html,
            **context,
        )

    def answer(
        template: str, read: Callable[[Any], Any], solve: Callable[[Any], Any]
    ) -> tuple[str, int]:
        """The page with the answer, or with the input's one-line error (status 400)."""
        form = request.form.to_dict() if request.method == "POST" else {}
        if request.method != "POST":
            return page(template, form=form, result=None, error=None), 200
        try:
            result = solve(read(form))
        except InputError as exc:
            return page(template, form=form, result=None, error=forms.message(exc)), 400
        return page(template, form=form, result=result, error=None), 200

    @app.before_request
    def _urlencoded_only() -> tuple[str, int] | None:
        if request.method == "POST" and request.mimetype != "application/x-www-form-urlencoded":
            return "forms are posted url-encoded (the page's own forms are)", 415
        return None

    @app.get("/plotly.min.js")
    def plotly_js() -> Response:
        response = Response(_plotly_js(), mimetype="application/javascript")
        response.cache_control.max_age = 3600
        return response

    @app.route("/", methods=["GET", "POST"])
    def training() -> tuple[str, int]:
        return answer("training.html", forms.training_query, answers.training_answer)

    @app.route("/serving", methods=["GET", "POST"])
    def serving() -> tuple[str, int]:
        return answer("serving.html", forms.serving_query, answers.serving_answer)

    def _download(
        template: str,
        read: Callable[[Any], Any],
        solve: Callable[[Any], Any],
        make: Callable[[Any], tuple[str, bytes, str]],
    ) -> Response | tuple[str, int]:
        form = request.form.to_dict()
        try:
            return _attachment(*make(solve(read(form))))
        except InputError as exc:
            return page(template, form=form, result=None, error=forms.message(exc)), 400

    @app.post("/report.html")
    def training_report() -> Response | tuple[str, int]:
        return _download(
            "training.html",
            forms.training_query,
            answers.training_answer,
            lambda a: (
                "gpuscale-training-report.html",
                a.report_html().encode(),
                "text/html; charset=utf-8",
            ),
        )

    @app.post("/serving/report.html")
    def serving_report() -> Response | tuple[str, int]:
        return _download(
            "serving.html",
            forms.serving_query,
            answers.serving_answer,
            lambda a: (
                "gpuscale-serving-report.html",
                a.report_html().encode(),
                "text/html; charset=utf-8",
            ),
        )

    @app.post("/export/<target>")
    def export(target: str) -> Response | tuple[str, int]:
        if target not in TARGETS:
            return page(
                "training.html",
                form=request.form.to_dict(),
                result=None,
                error=f"unknown export '{target[:40]}'; accepted: {', '.join(TARGETS)}",
            ), 404

        def make(a: answers.TrainingAnswer) -> tuple[str, bytes, str]:
            download = a.download(target)
            if download.result is None:
                raise InputError(f"{target}: {download.refused}")
            return download.payload()

        return _download("training.html", forms.training_query, answers.training_answer, make)

    @app.errorhandler(413)
    def too_large(_: Exception) -> tuple[str, int]:
        return page(
            "training.html",
            form={},
            result=None,
            error="the form is over 2 MiB; a config.json is a few KiB",
        ), 413

    @app.errorhandler(404)
    def not_found(_: Exception) -> tuple[str, int]:
        return page(
            "training.html", form={}, result=None, error=f"no page at {request.path[:80]}"
        ), 404

    @app.errorhandler(Exception)
    def bug(exc: Exception) -> tuple[str, int]:
        if isinstance(exc, HTTPException):  # 405 and the like: the protocol's own answer
            return page("training.html", form={}, result=None, error=str(exc.description)), (
                exc.code or 500
            )
        # A bug, not bad input: the details go to the server's log, never to the page.
        app.logger.exception("gpuscale serve: unexpected error on %s", request.path)
        return page(
            "training.html",
            form={},
            result=None,
            error="internal error: gpuscale could not answer this query (a bug; "
            "the server's log has the details)",
        ), 500

    return app
