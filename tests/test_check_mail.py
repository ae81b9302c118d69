"""``newsletter check-mail FILE.eml`` (core/mail_in/mail_check.py, cli/check_mail.py).

The messages are what our pipeline writes to the outbox (the local transport, the same bytes
a real one hands over), with a ``DKIM-Signature`` prepended as a relay's signer adds it. The
checker reads the signature's tags only, so the header is written by hand (dkimpy is not a
dependency); its ``b=``/``bh=`` are not a real signature and nothing here pretends they are.
"""

from __future__ import annotations

import io
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from support.commands import newsletter_main
from support.project import SAMPLE_WEEK, sample_settings

from pipeline.cli import main
from pipeline.core.email.message import Messages
from pipeline.core.mail_in.mail_check import NotAMail, check_mail
from pipeline.stages.build import build
from pipeline.stages.built import load_built
from pipeline.transport.outbox import OutboxTransport
from subscribers.tokens import Keys

NOW = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)
SID = "0123456789abcdef01234567"
READER = "reader@example.net"
KEYS = Keys.from_environ({"NEWSLETTER_SECRET": "test-secret-for-the-check-mail-tests-01"})

#: The signed header list of Debian's stock OpenDKIM: RFC 6376's list, no
#: List-Unsubscribe-Post.
STOCK = ("From:Reply-To:Subject:Date:To:Cc:Message-ID:MIME-Version:Content-Type:List-Id:"
         "List-Help:List-Unsubscribe:List-Subscribe:List-Post:List-Archive:From")
#: With ``SignHeaders *,+List-Unsubscribe,+List-Unsubscribe-Post`` and
#: ``OversignHeaders From,List-Unsubscribe,List-Unsubscribe-Post``.
OVERSIGNED = STOCK + ":List-Unsubscribe-Post:List-Unsubscribe:List-Unsubscribe-Post"
COVERED = STOCK + ":List-Unsubscribe-Post"


@pytest.fixture(scope="module")
def delivered(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """One issue as the outbox wrote it for one reader, both unsubscribe forms, https."""
    root = tmp_path_factory.mktemp("check-mail")
    settings = sample_settings(root)
    built = load_built(build(settings, week_id=SAMPLE_WEEK, out=root / "issue").out_dir)
    settings = replace(
        settings, site=replace(settings.site, app_url="https://news.example.org/api"),
        delivery=replace(settings.delivery, unsubscribe_mailto="unsub@example.org"))
    outbox = OutboxTransport(root / "outbox")
    messages = Messages(built, settings.site, settings.delivery, KEYS)
    outbox.send(messages.build(READER, SID, "zh-en", NOW))
    (path,) = (root / "outbox").glob("*.eml")
    return path.read_bytes()


def signed(raw: bytes, h: str = OVERSIGNED, d: str = "example.org", *,
           before: bytes = b"") -> bytes:
    """``raw`` with a relay's DKIM-Signature on top (folded as OpenDKIM folds it)."""
    header = (f"DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/simple; d={d};\r\n"
              f"\ts=mail; t=1796000000;\r\n"
              f"\tbh=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=;\r\n"
              f"\th={h[:60]}\r\n\t {h[60:]};\r\n"
              f"\tb=dGhpcyBpcyBub3QgYSByZWFsIHNpZ25hdHVyZQ==\r\n").encode()
    return before + header + raw


def names(result) -> dict[str, bool]:
    return {check.name: check.passed for check in result.checks}


# -- the checker -------------------------------------------------------------------------------


def test_a_message_signed_as_rfc_8058_asks_is_fit(delivered):
    result = check_mail(signed(delivered))
    assert names(result) == {
        "list-unsubscribe-https": True, "list-unsubscribe-mailto": True,
        "list-unsubscribe-post": True, "dkim-signature": True, "dkim-aligned": True,
        "dkim-covers": True, "dkim-oversigned": True}
    assert result.fit
    lines = result.lines()
    assert lines[0] == ("ok    List-Unsubscribe has an https URL "
                        "(https://news.example.org/api/unsubscribe)")
    assert "ok    DKIM-Signature d=example.org s=mail judged (the only one)" in lines
    assert lines[-2:] == ["fit to send: every required check holds",
                          "(DKIM tags read only: no DNS lookup, no signature verified, no public "
                          "suffix list)"]


def test_debian_stock_opendkim_does_not_cover_the_post_header(delivered):
    result = check_mail(signed(delivered, STOCK))
    assert not result.fit
    assert [check.name for check in result.failed] == ["dkim-covers"]
    assert ("FAIL  h= does not cover List-Unsubscribe-Post (a relay could change them and the "
            "signature would still hold)") in result.lines()
    assert "not fit to send: 1 required check failed" in result.lines()


def test_covered_but_not_oversigned_is_fit_with_a_warning(delivered):
    result = check_mail(signed(delivered, COVERED))
    assert result.fit
    assert names(result)["dkim-oversigned"] is False
    assert any(line.startswith("warn  h= does not oversign List-Unsubscribe and "
                               "List-Unsubscribe-Post") for line in result.lines())


def test_h_is_read_case_insensitively(delivered):
    result = check_mail(signed(delivered, OVERSIGNED.lower().replace("list-unsubscribe-post",
                                                                     "LIST-UNSUBSCRIBE-POST")))
    assert result.fit and names(result)["dkim-oversigned"]


@pytest.mark.parametrize(("d", "aligned"), [
    ("example.org", True),            # From is weekly@example.org
    ("EXAMPLE.ORG", True),
    ("mail.example.org", False),      # a child of the From domain: not a parent
    ("relay.example.net", False),
    ("org", False),                   # a bare top-level label aligns with nothing
])
def test_alignment_with_the_from_domain(delivered, d, aligned):
    assert names(check_mail(signed(delivered, d=d)))["dkim-aligned"] is aligned


def test_a_parent_domain_is_aligned(delivered):
    raw = delivered.replace(b"From: vLLM PR Weekly <weekly@example.org>",
                            b"From: vLLM PR Weekly <weekly@news.example.org>")
    assert raw != delivered
    result = check_mail(signed(raw, d="example.org"))
    assert result.fit
    assert "ok    d=example.org is a parent of the From domain news.example.org" in \
        result.lines()


def test_the_aligned_signature_is_judged_among_several(delivered):
    esp = signed(delivered, "From:To:Subject", d="esp.example.net")
    result = check_mail(signed(esp, OVERSIGNED, d="example.org"))  # ours on top…
    assert "ok    DKIM-Signature d=example.org s=mail judged (1 of 2)" in result.lines()
    below = signed(signed(delivered, OVERSIGNED), "From:To:Subject", d="esp.example.net")
    result = check_mail(below)  # …or below the ESP's
    assert result.fit
    assert "ok    DKIM-Signature d=example.org s=mail judged (2 of 2)" in result.lines()


def test_no_signature_is_not_fit(delivered):
    result = check_mail(delivered)
    assert not result.fit
    assert [check.name for check in result.failed] == ["dkim-signature"]


def test_without_the_post_header_or_an_https_url(delivered):
    raw = delivered.replace(b"List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n", b"")
    raw = raw.replace(b"<https://news.example.org/api/unsubscribe",
                      b"<http://news.example.org/api/unsubscribe")
    result = check_mail(signed(raw))
    assert {check.name for check in result.failed} == {"list-unsubscribe-https",
                                                       "list-unsubscribe-post"}


def test_without_a_mailto_only_a_warning(delivered):
    raw = delivered.replace(b",\r\n <mailto:", b"><mailto:").replace(b"<mailto:", b"<nomail:")
    result = check_mail(signed(raw))
    assert result.fit
    assert names(result)["list-unsubscribe-mailto"] is False


def test_a_second_list_unsubscribe_added_on_the_way_is_no_longer_oversigned(delivered):
    raw = signed(delivered, OVERSIGNED, before=b"List-Unsubscribe: <https://evil.example/u>\r\n")
    result = check_mail(raw)
    assert names(result)["dkim-oversigned"] is False
    # Two List-Unsubscribe headers: which one a provider POSTs to is anyone's guess.
    assert names(result)["list-unsubscribe-https"] is False and not result.fit
    assert any("appears 2 times" in line for line in result.lines())


def test_the_output_never_carries_the_token_or_the_reader(delivered):
    text = "\n".join(check_mail(signed(delivered)).lines())
    assert "token" not in text and READER not in text
    assert "unsub@" not in text and "…@example.org" in text


@pytest.mark.parametrize("raw", [b"", b"   \n", b"\x89PNG\r\n\x1a\n\x00\x00binary",
                                 b"{\"not\": \"a mail\"}\n", b"Subject: hi\n\nno sender\n"])
def test_what_is_not_a_mail(raw):
    with pytest.raises(NotAMail, match="not a mail"):
        check_mail(raw)


# -- the command -------------------------------------------------------------------------------


def test_command_exit_codes(delivered, tmp_path):
    """0 when fit, 3 when not; the file is all it reads: no store, no outbox, no secret."""
    good, stock = tmp_path / "good.eml", tmp_path / "stock.eml"
    good.write_bytes(signed(delivered))
    stock.write_bytes(signed(delivered, STOCK))
    result = newsletter_main(["check-mail", str(good)], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-2] == "fit to send: every required check holds"
    result = newsletter_main(["check-mail", str(stock)], cwd=tmp_path)
    assert result.returncode == 3
    assert "FAIL  h= does not cover List-Unsubscribe-Post" in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.eml", "stock.eml"]


def test_command_reads_stdin(delivered, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(signed(delivered))))
    assert main(["check-mail", "-"]) == 0
    assert "fit to send" in capsys.readouterr().out


@pytest.mark.parametrize(("name", "text", "message"), [
    ("missing.eml", None, "cannot read it: No such file or directory"),
    ("", None, "is a folder, not a mail file"),
    ("notes.txt", "just some text\n", "not a mail: it has no header fields"),
], ids=["missing", "folder", "no-header"])
def test_command_refuses_what_it_cannot_check(tmp_path, name, text, message):
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    result = newsletter_main(["check-mail", str(path)], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == f"newsletter: error: check-mail {path}: {message}\n"
