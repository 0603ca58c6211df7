"""`--metrics-secure`, `--metrics-cert-file`, `--metrics-key-file` (issue 31): which address serves what, and a
bad combination or certificate is a one-line user error (exit 2) before anything connects."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.cli import main
from scheduler.flags import parse_controllers, parse_scheduler


@pytest.mark.parametrize(("argv", "serving"), [
    (("--listen-address=:8080",), ((":8080", False),)),
    (("--listen-address=:8080", "--metrics-secure"), ((":8080", True),)),
    # Volcano's health address beside a secure metrics address: plain HTTP, the probes alone
    (("--listen-address=:8080", "--metrics-secure", "--enable-healthz"), ((":8080", True), (":11251", False))),
    (("--enable-metrics", "--metrics-secure"), ((":8080", True),)),
    (("--listen-address=:9", "--enable-healthz", "--healthz-address=:9", "--metrics-secure"), ((":9", True),)),
])
def test_the_metrics_address_alone_is_secure(argv: tuple[str, ...], serving: tuple[tuple[str, bool], ...]) -> None:
    opts = parse_scheduler(argv)
    assert opts.serving == serving
    assert opts.metrics_tls_problem() is None


def test_the_controllers_take_the_same_flags() -> None:
    opts = parse_controllers(["--enable-metrics", "--metrics-secure", "--metrics-cert-file=/c",
                              "--metrics-key-file=/k"])
    assert opts.serving == ((":8081", True),)
    assert (opts.metrics_cert_file, opts.metrics_key_file) == ("/c", "/k")


@pytest.mark.parametrize(("argv", "problem"), [
    (("--listen-address=:1", "--metrics-secure", "--metrics-cert-file=/c"), "go together"),
    (("--listen-address=:1", "--metrics-secure", "--metrics-key-file=/k"), "go together"),
    (("--listen-address=:1", "--metrics-cert-file=/c", "--metrics-key-file=/k"), "needs --metrics-secure"),
    (("--metrics-secure",), "needs a metrics address"),
    (("--metrics-secure", "--enable-healthz"), "needs a metrics address"),
])
def test_a_bad_combination_is_named(argv: tuple[str, ...], problem: str) -> None:
    assert problem in (parse_scheduler(argv).metrics_tls_problem() or "")


@pytest.mark.parametrize("component", ["scheduler", "controllers"])
def test_a_bad_combination_exits_2_before_connecting(component: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([component, "--metrics-secure", "--kubeconfig=/nonexistent"]) == 2
    err = capsys.readouterr().err
    assert "--metrics-secure needs a metrics address" in err and "Traceback" not in err


@pytest.mark.parametrize("component", ["scheduler", "controllers"])
def test_an_unreadable_certificate_exits_2_naming_it(component: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "tls.crt").write_text("not a certificate")
    (tmp_path / "tls.key").write_text("not a key")
    argv = [component, "--listen-address=127.0.0.1:0", "--metrics-secure", f"--metrics-cert-file={tmp_path}/tls.crt",
            f"--metrics-key-file={tmp_path}/tls.key", "--kubeconfig=/nonexistent"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path}/tls.crt" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
