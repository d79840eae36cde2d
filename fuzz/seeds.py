#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/ (committed; run again only to change them).

Real payloads come from the repository's testdata/ (Stripe-shaped events built on dj-stripe's
fixtures and octokit/webhooks' GitHub examples, both MIT, see their READMEs); the rest are the
examples of idem's docs and of the senders' docs. Every delivery is signed with the secrets its
fuzz target holds, at the targets' clock (1 700 000 000), so the seeds reach the accepting paths;
a few are deliberately broken. Run from anywhere: python3 fuzz/seeds.py
"""

import base64
import hashlib
import hmac
import json
from pathlib import Path

FUZZ = Path(__file__).resolve().parent
DATA = FUZZ.parent / "testdata"
NOW = 1_700_000_000

STRIPE_SECRET = b"whsec_fuzz0stripe0secret0a1b2c3d4e5f"
GITHUB_SECRET = b"fuzz-github-webhook-secret-7d1c"
SHOPIFY_SECRET = b"fuzz-shopify-client-secret-9b2e"
GENERIC_SECRET = b"fuzz-generic-shared-secret-41aa"
SW_SECRET = b"fuzz-standard-webhooks-secret-5f"
MSG_ID = "msg_2KWPBgLlAfxdpx2AI54pPJ85f1W"


def mac(key, message):
    return hmac.new(key, message, hashlib.sha256).digest()


def delivery(headers, body):
    head = "".join(f"{name}: {value}\n" for name, value in headers)
    return head.encode() + b"\n" + body


def write(target, name, data):
    folder = FUZZ / "corpus" / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)


def compact(path):
    """A payload file as one line of JSON, as senders send it."""
    return json.dumps(json.loads(path.read_bytes()), separators=(",", ":")).encode()


DOC_BODY = b'{"id":"evt_1","type":"customer.created","amount":1.50}'
events = (DATA / "stripe-events/events.jsonl").read_bytes().splitlines()
stripe_bodies = {"doc-example": DOC_BODY}
for kind in ("customer.created", "customer.subscription.created", "invoice.paid", "charge.refunded"):
    stripe_bodies[kind] = next(e for e in events if f'"type":"{kind}"'.encode() in e)
github_bodies = {
    "ping": compact(DATA / "github/ping/payload.json"),
    "push": compact(DATA / "github/push/payload.json"),
    "docs-hello": b"Hello, World!",
}
shopify_body = b'{"id":820982911946154508,"email":"jon@example.com","closed_at":null,"total_price":"403.00"}'


def stripe():
    def header(body, t=NOW, secrets=(STRIPE_SECRET,), extra=""):
        sigs = ",".join(f"v1={mac(s, str(t).encode() + b'.' + body).hex()}" for s in secrets)
        return f"t={t},{sigs}{extra}"

    for name, body in stripe_bodies.items():
        write("verify_stripe", name, delivery([("Stripe-Signature", header(body))], body))
    body = DOC_BODY
    write("verify_stripe", "rotation-v0", delivery(
        [("Stripe-Signature", header(body, secrets=(b"whsec_old", STRIPE_SECRET), extra=",v0=abcdef"))], body))
    write("verify_stripe", "stale", delivery([("Stripe-Signature", header(body, t=NOW - 3600))], body))
    reserialised = b'{"amount":1.5,"id":"evt_1","type":"customer.created"}'
    write("verify_stripe", "reserialised", delivery([("Stripe-Signature", header(body))], reserialised))
    write("verify_stripe", "two-timestamps", delivery([("Stripe-Signature", "t=1,t=2,v1=00")], body))
    write("verify_stripe", "repeated-header", delivery(
        [("Stripe-Signature", header(body)), ("Stripe-Signature", header(body))], body))


def github():
    for name, body in github_bodies.items():
        sig = mac(GITHUB_SECRET, body).hex()
        write("verify_github", name, delivery(
            [("X-GitHub-Event", "ping"), ("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
             ("X-Hub-Signature-256", f"sha256={sig}")], body))
    # GitHub's documented example, signed with its own secret: well formed, not ours.
    write("verify_github", "docs-other-secret", delivery(
        [("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")],
        b"Hello, World!"))
    write("verify_github", "uppercase-hex", delivery(
        [("X-Hub-Signature-256", "sha256=" + mac(GITHUB_SECRET, b"{}").hex().upper())], b"{}"))


def shopify():
    sig = base64.b64encode(mac(SHOPIFY_SECRET, shopify_body)).decode()
    write("verify_shopify", "order", delivery(
        [("X-Shopify-Topic", "orders/create"), ("X-Shopify-Hmac-Sha256", sig),
         ("X-Shopify-Event-Id", "98880550-7158-44d4-b7cd-2c97c8a091b5")], shopify_body))
    write("verify_shopify", "not-base64", delivery([("X-Shopify-Hmac-Sha256", "!!!")], shopify_body))


def generic():
    body = b'{"event":"order.paid","order":{"id":"o-1","version":3}}'
    write("verify_generic_hmac", "hex-prefix", delivery(
        [("X-Acme-Signature", "sha256=" + mac(GENERIC_SECRET, body).hex())], body))
    write("verify_generic_hmac", "base64", delivery(
        [("X-Signature", base64.b64encode(mac(GENERIC_SECRET, body)).decode())], body))
    write("verify_generic_hmac", "prefix-case", delivery(
        [("X-Acme-Signature", "SHA256=" + mac(GENERIC_SECRET, body).hex())], body))


def standard_webhooks():
    body = b'{"type":"contact.created","timestamp":"2022-11-03T20:26:10.344522Z","data":{"id":"c_1"}}'
    msg = f"{MSG_ID}.{NOW}.".encode() + body
    v1 = base64.b64encode(mac(SW_SECRET, msg)).decode()
    headers = [("webhook-id", MSG_ID), ("webhook-timestamp", str(NOW))]
    write("verify_standard_webhooks", "v1", delivery(headers + [("webhook-signature", f"v1,{v1}")], body))
    write("verify_standard_webhooks", "v1-rotation", delivery(
        headers + [("webhook-signature", f"v1,{base64.b64encode(b'x' * 32).decode()} v1,{v1} v2,abc")], body))
    write("verify_standard_webhooks", "v1a-wrong-length", delivery(
        headers + [("webhook-signature", f"v1a,{v1}")], body))
    # The specification's example, with its own secret: well formed, not ours, and stale.
    write("verify_standard_webhooks", "spec-example", delivery(
        [("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek"), ("webhook-timestamp", "1614265330"),
         ("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")], b'{"test": 2432232314}'))


def idempotency_key():
    for name, value in {
        "uuid": b"8e03978e-40d5-43e8-bc93-6894a57f9324",
        "quoted": b'"8e03978e-40d5-43e8-bc93-6894a57f9324"',
        "escapes": b'"a\\"b\\\\c"',
        "spaces": b'  " k 1 "\t',
        "blank-quoted": b'"   "',
        "parameters": b'"abc";p=1',
        "bad-escape": b'"a\\nb"',
        "unclosed": b'"abc',
        "non-ascii": b"k\xc3\xa9",
        "longest": b"k" * 255,
        "too-long-quoted": b'"' + b"k" * 256 + b'"',
        # found by fuzzing: a tab inside a bare key was kept
        "found-inner-tab": b"0\t0R",
    }.items():
        write("idempotency_key", name, value)


def read_event():
    # The first byte picks the source (its value modulo 7, in the target's order): F stripe,
    # G github, H shopify, I sw, J acme, K orders, L billing.
    def event(pick, headers, body):
        return pick.encode() + b"\n" + delivery(headers, body)

    json_type = [("Content-Type", "application/json")]
    write("read_event", "stripe-subscription", event("F", json_type, stripe_bodies["customer.subscription.created"]))
    write("read_event", "stripe-doc", event("F", json_type, DOC_BODY))
    write("read_event", "github-ping", event("G", [
        ("X-GitHub-Event", "ping"), ("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")],
        github_bodies["ping"]))
    write("read_event", "shopify-webhook-id", event("H", [
        ("X-Shopify-Topic", "orders/create"), ("X-Shopify-Webhook-Id", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043")],
        shopify_body))
    write("read_event", "standard-webhooks", event("I", [("webhook-id", MSG_ID)], b'{"type":"contact.created"}'))
    write("read_event", "acme", event("J", [("X-Event-Id", "e-42")],
                                      b'{"event":"order.paid","order":{"id":"o-1","version":"3"}}'))
    write("read_event", "nats", event("K", [("Nats-Msg-Id", "m-1"), ("nats-subject", "orders.created")], b"\x00\xff"))
    write("read_event", "rabbitmq", event("L", [("amqp-message-id", "m-1"), ("amqp-routing-key", "billing.paid")], b""))


def redact_url():
    for i, url in enumerate([
        "postgres://app:pw@db:5432/app?sslmode=require&PASSWORD=pw",
        "amqp://guest:guest@127.0.0.1:5672/%2f",
        "nats://tok@host",
        "sqlite://./idem-data/idem.db",
        "sqlite://./a@b.db",
        "postgres://db?%70assword=s3cret&pass%77ord=x&dbname=x#top",
        "postgres:x?password=a@b&oldpassword=kept",
        "postgres://app:pw@db/app?sslmode=require&sslpassword=k3y&password=s3cret",
        "https://user:pass@example.com:8443/hook?x=1",
        "http:\\\\app:pw@host\\path",
        "tls://u:p@[::1]:4222",
    ]):
        write("redact_url", f"doc-{i:02}", url.encode())
    # found by fuzzing: the URL parser drops tabs and line breaks, the redactor did not
    write("redact_url", "found-tab-newline-user-info", b"g:\t\n//+@D\r\ro~`#\0\0\x11`")
    write("redact_url", "found-tab-in-scheme-and-query", b"postgres:\t//app:pw@db/app?pass\tword=s3cret")


for make in (stripe, github, shopify, generic, standard_webhooks, idempotency_key, read_event, redact_url):
    make()
