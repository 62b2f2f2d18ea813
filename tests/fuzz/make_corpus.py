#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets: tests/fuzz/corpus/<target>/.

Run from anywhere: python3 tests/fuzz/make_corpus.py. It rewrites the files
it makes (names are stable) and leaves any other file in the directories
(inputs that libFuzzer found and that were added by hand) alone. Tokens are
signed with the targets' secret (api_fixture.hpp) and expire in 2100.
"""
import base64
import hashlib
import hmac
import json
import os

SECRET = b"fuzz-secret"
FAR = 4102444800  # 2100-01-01
HERE = os.path.dirname(os.path.abspath(__file__))


def b64(x):
    return base64.urlsafe_b64encode(x).rstrip(b"=")


def token(user, expiry=FAR, secret=SECRET):
    body = b"v1." + b64(user) + b"." + str(expiry).encode()
    return body + b"." + b64(hmac.new(secret, body, hashlib.sha256).digest())


ALICE, BOB = token(b"alice"), token(b"bob")


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def req(method, target, tok=None, body=None, extra=b"", version=b"HTTP/1.1"):
    head = method + b" " + target + b" " + version + b"\r\nHost: x\r\n"
    if tok is not None:
        head += b"Authorization: Bearer " + tok + b"\r\n"
    if body is not None:
        head += b"Content-Type: application/json\r\nContent-Length: " \
            + str(len(body)).encode() + b"\r\n"
    return head + extra + b"\r\n" + (body or b"")


def jb(obj):
    return json.dumps(obj).encode()


def http():
    t = {}
    # The attack of issue 12: a non-UTF-8 path echoed into a JSON detail.
    t["attack_ff_path"] = b"GET /\xff HTTP/1.1\r\n\r\n"
    t["attack_ff_path_bare"] = b"GET /\xff HTTP/1.1"
    t["attack_ff_405"] = req(b"DELETE", b"/healthz\xff")
    t["attack_ff_route"] = req(b"POST", b"/v1/users/\xff\xfe/tickets", ALICE, b"{}")
    t["attack_ff_ws"] = req(b"GET", b"/v1/users/\xff/events", ALICE,
                            extra=b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
                            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                            b"Sec-WebSocket-Version: 13\r\n")
    t["attack_ff_method"] = b"G\xffT / HTTP/1.1\r\n\r\n"
    t["healthz"] = req(b"GET", b"/healthz")
    t["readyz"] = req(b"GET", b"/readyz")
    t["metrics"] = req(b"GET", b"/metrics?x=1")
    t["healthz_post"] = req(b"POST", b"/healthz", body=b"")
    t["http10"] = req(b"GET", b"/healthz", version=b"HTTP/1.0")
    t["asterisk"] = b"OPTIONS * HTTP/1.1\r\n\r\n"
    t["absolute"] = b"GET http://x/healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    t["empty_lines"] = b"\r\n\r\n\r\n"
    t["no_colon"] = b"GET / HTTP/1.1\r\nHost x\r\n\r\n"
    t["obs_fold"] = b"GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n"
    t["two_lengths"] = b"POST /healthz HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"
    t["te_and_length"] = (b"POST /v1/users/alice/tickets HTTP/1.1\r\nAuthorization: Bearer "
                          + ALICE + b"\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
                          b"2\r\n{}\r\n0\r\n\r\n")
    # Request smuggling: a join hidden in a body framed by a transfer coding
    # the front door does not take; answered with an error, then closed.
    hidden = req(b"POST", b"/v1/users/bob/tickets", BOB,
                 jb({"queue": "default", "ticket": "t-9"}))
    for name, te in (("te_xchunked", b"xchunked"), ("te_identity", b"identity"),
                     ("te_chunked_identity", b"chunked, identity"),
                     ("te_twice", b"chunked, chunked"),
                     ("te_two_fields", b"chunked\r\nTransfer-Encoding: chunked"),
                     ("te_gzip_chunked", b"gzip, chunked")):
        t[name] = req(b"POST", b"/v1/users/alice/tickets", ALICE,
                      extra=b"Transfer-Encoding: " + te + b"\r\n") + hidden
    # Huge lengths: announced bodies past --max-body, a chunk past it, heads
    # past --max-header.
    t["huge_length"] = b"POST /healthz HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n"
    t["big_length"] = b"POST /healthz HTTP/1.1\r\nContent-Length: 20000\r\n\r\n" + b"x" * 100
    t["huge_chunk"] = (b"POST /v1/users/alice/tickets HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                       b"ffffffffffffffff\r\nab\r\n")
    t["bad_chunk"] = b"POST /healthz HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"
    t["long_header"] = b"GET / HTTP/1.1\r\nX: " + b"a" * 9000 + b"\r\n\r\n"
    t["half_sent"] = b"POST /healthz HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc"
    # The API with valid tokens.
    t["join"] = req(b"POST", b"/v1/users/alice/tickets", ALICE,
                    jb({"queue": "default", "ticket": "t-1", "attrs": "{\"elo\":1200}"}))
    t["join_voice_giveup"] = req(b"POST", b"/v1/users/bob/tickets", BOB,
                                 jb({"queue": "voice", "ticket": "t-2", "give_up_after_s": 5}))
    t["join_unknown_queue"] = req(b"POST", b"/v1/users/alice/tickets", ALICE,
                                  jb({"queue": "nope", "ticket": "t-3"}))
    t["join_nul_attrs"] = req(b"POST", b"/v1/users/alice/tickets", ALICE,
                              b'{"queue":"default","ticket":"t-4","attrs":"a\\u0000b"}')
    t["join_bad_utf8"] = req(b"POST", b"/v1/users/alice/tickets", ALICE,
                             b'{"queue":"default","ticket":"t\xff"}')
    t["state"] = req(b"GET", b"/v1/users/alice/tickets/t-1", ALICE)
    t["cancel"] = req(b"DELETE", b"/v1/users/alice/tickets/t-1", ALICE)
    t["heartbeat"] = req(b"POST", b"/v1/users/alice/tickets/t-1/heartbeat", ALICE, b"{}")
    t["swipe"] = req(b"POST", b"/v1/users/alice/swipes", ALICE,
                     jb({"to": "bob", "action": "LIKE"}))
    t["swipe_back"] = req(b"POST", b"/v1/users/bob/swipes", BOB,
                          jb({"to": "alice", "action": "LIKE"}))
    t["end"] = req(b"POST", b"/v1/users/alice/sessions/s-1/end", ALICE,
                   jb({"reason": "done"}))
    t["events_get"] = req(b"GET", b"/v1/users/alice/events", ALICE)
    t["ws_alice"] = req(b"GET", b"/v1/users/alice/events?access_token=" + ALICE, None,
                        extra=b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
                        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                        b"Sec-WebSocket-Version: 13\r\n")
    t["ws_other_user"] = req(b"GET", b"/v1/users/bob/events", ALICE,
                             extra=b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
                             b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                             b"Sec-WebSocket-Version: 13\r\n")
    # A token the host signed for a user id the API refuses elsewhere.
    t["ws_invalid_user"] = req(b"GET", b"/v1/users/a%b/events", token(b"a%b"),
                               extra=b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
                               b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                               b"Sec-WebSocket-Version: 13\r\n")
    # Tokens: of another user, expired, forged, truncated, none.
    t["token_other_user"] = req(b"GET", b"/v1/users/bob/tickets/t-1", ALICE)
    t["token_expired"] = req(b"GET", b"/v1/users/alice/tickets/t-1", token(b"alice", 1000))
    t["token_forged"] = req(b"GET", b"/v1/users/alice/tickets/t-1", token(b"alice", secret=b"x"))
    t["token_truncated"] = req(b"GET", b"/v1/users/alice/tickets/t-1", ALICE[:-5])
    t["token_none"] = req(b"GET", b"/v1/users/alice/tickets/t-1")
    t["bad_ticket_id"] = req(b"GET", b"/v1/users/alice/tickets/a%20b", ALICE)
    # Several requests on one connection.
    t["pipelined"] = (req(b"GET", b"/healthz") + req(b"POST", b"/v1/users/alice/tickets", ALICE,
                      jb({"queue": "default", "ticket": "t-9"}))
                      + req(b"GET", b"/v1/users/alice/tickets/t-9", ALICE)
                      + req(b"DELETE", b"/v1/users/alice/tickets/t-9", ALICE))
    t["pipelined_close"] = req(b"GET", b"/healthz", extra=b"Connection: close\r\n") + req(b"GET", b"/readyz")
    for k, v in t.items():
        write("http", k, v)


def body():
    # Byte 0: route (0 join, 1 swipe, 2 end, 3 attrs of a join) + 4 for bob.
    b = {}
    j = lambda o: b"\x00" + jb(o)
    b["join"] = j({"queue": "default", "ticket": "t-1"})
    b["join_bob_voice"] = b"\x04" + jb({"queue": "voice", "ticket": "t-2", "attrs": "x"})
    b["join_unknown_queue"] = j({"queue": "nope", "ticket": "t-1"})
    b["join_queue_number"] = j({"queue": 5, "ticket": "t-1"})
    b["join_no_ticket"] = j({"queue": "default"})
    b["join_bad_ticket"] = j({"queue": "default", "ticket": "a b"})
    b["join_attrs_4096"] = j({"queue": "default", "ticket": "t-5", "attrs": "a" * 4096})
    b["join_attrs_4097"] = j({"queue": "default", "ticket": "t-5", "attrs": "a" * 4097})
    for n, g in [("0", 0), ("1", 1), ("86400", 86400), ("86401", 86401), ("neg", -1),
                 ("float", 1.5), ("string", "5"), ("huge", 99999999999999999999)]:
        b["join_giveup_" + n] = j({"queue": "default", "ticket": "t-6", "give_up_after_s": g})
    b["join_giveup_1e400"] = b'\x00{"queue":"default","ticket":"t-6","give_up_after_s":1e400}'
    b["dup_keys"] = b'\x00{"queue":"nope","queue":"default","ticket":"t-7"}'
    # Not JSON objects.
    for n, v in [("empty", b""), ("array", b"[]"), ("null", b"null"),
                 ("truncated", b'{"queue":'), ("ff", b'{"queue":"\xff"}'),
                 ("overlong", b'{"queue":"\xc0\xaf"}'),
                 ("lone_surrogate", b'{"queue":"\\ud800"}'),
                 ("swapped_surrogates", b'{"queue":"\\udc00\\ud800"}'),
                 ("trailing", b'{} x'), ("bom", b'\xef\xbb\xbf{}'),
                 ("nul_byte", b'{"queue":"de\x00fault"}')]:
        b["notjson_" + n] = b"\x00" + v
    b["deep_nesting"] = b"\x00" + b"[" * 16000 + b"]" * 16000
    b["deep_object"] = b"\x00" + b'{"a":' * 4000 + b"1" + b"}" * 4000
    # Swipes.
    s = lambda o: b"\x01" + jb(o)
    b["swipe_like"] = s({"to": "bob", "action": "LIKE"})
    b["swipe_dislike"] = s({"to": "bob", "action": "DISLIKE"})
    b["swipe_back"] = b"\x05" + jb({"to": "alice", "action": "LIKE"})
    b["swipe_self"] = s({"to": "alice", "action": "LIKE"})
    b["swipe_lower"] = s({"to": "bob", "action": "like"})
    b["swipe_nul_to"] = s({"to": "bo\u0000b", "action": "LIKE"})
    b["swipe_to_number"] = s({"to": 7, "action": "LIKE"})
    # Ends of an unknown session.
    e = lambda o: b"\x02" + jb(o)
    b["end"] = e({})
    b["end_reason"] = e({"reason": "done"})
    b["end_reason_empty"] = e({"reason": ""})
    b["end_reason_257"] = e({"reason": "r" * 257})
    b["end_reason_number"] = e({"reason": 1})
    b["end_reason_unicode"] = e({"reason": "fin \u00e9\U0001f600"})
    # Inside the attrs string of a join.
    for n, v in [("nul", b"\\u0000"), ("lone_surrogate", b"\\ud800"), ("ff", b"\xff\xfe"),
                 ("backslash", b"\\\\"), ("long", b"a" * 5000), ("emoji", b"\\ud83d\\ude00"),
                 ("breakout", b'x","queue":"voice'), ("quote", b'\\"'),
                 ("control", b"\x01\x1f"), ("utf8", "caf\u00e9".encode())]:
        b["attrs_" + n] = b"\x03" + v
    for k, v in b.items():
        write("body", k, v)


def token_corpus():
    t = {}
    t["alice"] = ALICE
    t["bob"] = BOB
    t["expired"] = token(b"alice", 1000)
    t["forged"] = token(b"alice", secret=b"other")
    for n in (1, 3, 10, 20, 40):
        t["truncated_%d" % n] = ALICE[:-n]
    t["prefix_only"] = b"v1."
    t["dots"] = b"v1..."
    t["four_parts"] = ALICE + b".x"
    t["v2"] = b"v2" + ALICE[2:]
    t["expiry_letters"] = b"v1." + b64(b"alice") + b".12a4.xxxx"
    t["expiry_19_digits"] = b"v1." + b64(b"alice") + b".9999999999999999999." + ALICE.split(b".")[3]
    t["expiry_18_digits"] = token(b"alice", 999999999999999999)
    t["padding"] = ALICE + b"=="
    parts = ALICE.split(b".")
    t["noncanonical_sig"] = b".".join(parts[:3] + [parts[3][:-1] + b"B"])
    t["user_bad_b64"] = b"v1.a*b." + parts[2] + b"." + parts[3]
    t["user_len_mod4_1"] = b"v1.abcde." + parts[2] + b"." + parts[3]
    t["long"] = b"v1." + b"A" * 1100 + b".1.x"
    t["empty"] = b""
    t["sign_user"] = b"alice\n4102444800"
    t["sign_expired"] = b"alice\n1"
    t["sign_binary_user"] = b"\xff\x00.\n4102444800"
    t["sign_long_user"] = b"u" * 900 + b"\n4102444800"
    t["user_binary"] = token(b"\xff\x00a.b")
    for k, v in t.items():
        write("token", k, v)


def resp(*items):
    out = b"*%d\r\n" % len(items)
    for i in items:
        if isinstance(i, int):
            out += b":%d\r\n" % i
        else:
            i = i.encode() if isinstance(i, str) else i
            out += b"$%d\r\n%s\r\n" % (len(i), i)
    return out


def codec():
    c = {}
    r = lambda *items: b"\x00" + resp(*items)
    c["created"] = r("created", "t-1", "5", 5, 1000)
    c["exists"] = r("exists", "t-1", "5", 5, 1000, "claimed")
    c["duplicate"] = r("duplicate", "t-0")
    c["invalid"] = r("invalid", "user")
    c["stale_token"] = r("stale_token", "t-1")
    c["not_found"] = r("not_found")
    c["matched"] = r("matched", "t-1", "5", "bob", "t-2", "node-1", "{}", 3, "3", 0)
    c["queued"] = r("queued", "t-1", "5", 5, 1000, 2, "1")
    c["claimed"] = r("claimed", "t-1", "5", "bob", "t-2", "node-2")
    c["cancelled"] = r("cancelled", "t-1")
    c["in_flight"] = r("in_flight", "t-1", "claimed", "node-2")
    c["alive"] = r("alive", "t-1", "waiting", 99)
    c["gone"] = r("gone")
    c["requeued"] = r("requeued", "t-1", 7)
    c["waiting"] = r("waiting", "t-1", 7)
    c["stale"] = r("stale", "t-1")
    c["released"] = r("released", "t-1")
    c["swept"] = r("swept", 3, "1", 10, 12)
    c["swept_negative"] = r("swept", -3, "1", -10, "-12")
    c["short_matched"] = r("matched", "t-1")
    c["short_queued"] = r("queued", "t-1", "5")
    c["short_created"] = r("created")
    c["numbers_overflow"] = r("created", "t-1", "5", "99999999999999999999", "-99999999999999999999x")
    c["unknown_word"] = r("weird", "x")
    c["integer_head"] = r(7, "x")
    c["nested"] = b"\x00*2\r\n*1\r\n$7\r\ncreated\r\n$1\r\nx\r\n"
    c["nil_elements"] = b"\x00*3\r\n$-1\r\n$-1\r\n$-1\r\n"
    c["empty_array"] = b"\x00*0\r\n"
    c["nil_array"] = b"\x00*-1\r\n"
    c["error_reply"] = b"\x00-ERR something\r\n"
    c["noscript"] = b"\x00-NOSCRIPT No matching script\r\n"
    c["status"] = b"\x00+OK\r\n"
    c["nil"] = b"\x00$-1\r\n"
    c["integer"] = b"\x00:12\r\n"
    c["huge_bulk"] = b"\x00$99999999999\r\nabc"
    c["huge_array"] = b"\x00*2147483647\r\n"
    c["negative_bulk"] = b"\x00$-7\r\n"
    c["resp3_double"] = b"\x00,1.5\r\n"
    c["garbage"] = b"\x00hello\r\n"
    c["pipelined"] = b"\x00" + resp("created", "t-1", "5", 5, 1000) + resp("gone") + b"+OK\r\n"
    c["binary_strings"] = r("matched", b"\xff\x00", "5", b"\x00", "t-2", "n", b"\xfe", 3, "3", 0)
    c["transport"] = b"\x02" + resp("created", "t-1", "5", 5, 1000)
    # Specs built into calls and run by the embedded store (odd byte 0):
    # queue, user, ticket, node, attrs, ttl_ms, scan, hold_ms.
    s = lambda fields, claim=False: (b"\x03" if claim else b"\x01") + b"\n".join(fields)
    ok = [b"default", b"alice", b"t-1", b"node-1", b"{}", b"30000", b"10", b"1000"]
    c["spec_enqueue"] = s(ok)
    c["spec_claim"] = s(ok, True)
    for i, (n, v) in enumerate([("queue_braces", b"{x}"), ("queue_65", b"q" * 65),
                                ("queue_at", b"a@b"), ("user_empty", b""),
                                ("ticket_301", b"t" * 301), ("node_space", b"a b")]):
        f = list(ok)
        f[[0, 0, 0, 1, 2, 3][i]] = v
        c["spec_" + n] = s(f)
    for n, v in [("attrs_4096", b"a" * 4096), ("attrs_4097", b"a" * 4097),
                 ("attrs_nul", b"a\x00b"), ("attrs_ff", b"\xff\xfe"),
                 ("attrs_overlong", b"\xc0\xaf"), ("attrs_utf8", "\u00e9".encode())]:
        f = list(ok)
        f[4] = v
        c["spec_" + n] = s(f)
    for n, idx, v in [("ttl_0", 5, b"0"), ("ttl_max", 5, b"3600000"), ("ttl_over", 5, b"3600001"),
                      ("ttl_huge", 5, b"99999999999"), ("scan_0", 6, b"0"), ("scan_101", 6, b"101"),
                      ("hold_0", 7, b"0")]:
        f = list(ok)
        f[idx] = v
        c["spec_" + n] = s(f, idx >= 6)
    c["spec_user_at"] = s([b"default", b"a@b.c", b"t:1", b"n", b"", b"1", b"1", b"1"], True)
    for k, v in c.items():
        write("codec", k, v)


if __name__ == "__main__":
    http()
    body()
    token_corpus()
    codec()
