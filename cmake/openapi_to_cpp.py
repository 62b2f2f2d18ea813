#!/usr/bin/env python3
"""docs/openapi.yaml -> a C++ source that holds it as JSON (served by matchd
at /openapi.json; nothing is read at run time).

Usage: openapi_to_cpp.py OPENAPI_YAML OUT_CPP
Fails the build, naming the problem, when the description is not a sound
OpenAPI 3 document: version, info, operations without responses, duplicate
operationIds, path parameters not declared, $refs that resolve to nothing,
responses with keys OpenAPI does not know.
"""
import json, os, re, sys

import yaml  # python3-yaml (deploy/setup.sh)

src, out = sys.argv[1:3]
with open(src, encoding="utf-8") as f:
    doc = yaml.safe_load(f)

problems = []
def bad(msg):
    problems.append(f"{src}: {msg}")

if not isinstance(doc, dict) or not str(doc.get("openapi", "")).startswith("3."):
    sys.exit(f"{src}: not an OpenAPI 3 document (openapi: 3.x)")
info = doc.get("info") or {}
if not info.get("title") or not info.get("version"):
    bad("info.title and info.version are required")

def resolve(ref):
    if not ref.startswith("#/"):
        return None
    node = doc
    for part in ref[2:].split("/"):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node

def check_refs(node, where):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref":
                if not isinstance(v, str) or resolve(v) is None:
                    bad(f"{where}: $ref {v!r} resolves to nothing")
            else:
                check_refs(v, where)
    elif isinstance(node, list):
        for v in node:
            check_refs(v, where)

methods = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
op_ids = set()
paths = doc.get("paths")
if not isinstance(paths, dict) or not paths:
    bad("paths: none described")
    paths = {}
for path, item in paths.items():
    if not path.startswith("/"):
        bad(f"path {path!r} must start with /")
    templated = set(re.findall(r"\{([^}]+)\}", path))
    def declared(params):
        names = set()
        for p in params or []:
            if "$ref" in p:
                p = resolve(p["$ref"]) or {}
            if p.get("in") == "path":
                if p.get("required") is not True:
                    bad(f"{path}: path parameter {p.get('name')} must be required")
                names.add(p.get("name"))
        return names
    common = declared(item.get("parameters"))
    ops = [m for m in item if m in methods]
    if not ops:
        bad(f"{path}: no operation")
    for m in ops:
        op = item[m]
        where = f"{m.upper()} {path}"
        if not op.get("responses"):
            bad(f"{where}: no responses")
        oid = op.get("operationId")
        if not oid:
            bad(f"{where}: no operationId")
        elif oid in op_ids:
            bad(f"{where}: operationId {oid} used twice")
        op_ids.add(oid)
        # A response holds only these: a comma in an unquoted flow-style
        # description ({description: a, b}) makes a bogus key of the rest.
        for code, resp in (op.get("responses") or {}).items():
            if not re.fullmatch(r"[1-5][0-9X]{2}|default", str(code)):
                bad(f"{where}: response code {code!r}")
            if isinstance(resp, dict):
                extra = sorted(set(resp) - {"description", "content",
                                            "headers", "links", "$ref"})
                if extra:
                    bad(f"{where}: response {code} has unknown keys {extra} "
                        f"(quote a description that holds a comma)")
        names = common | declared(op.get("parameters"))
        if names != templated:
            bad(f"{where}: path parameters {sorted(names)} do not match "
                f"the template's {sorted(templated)}")
check_refs(doc, "document")
if problems:
    sys.exit("\n".join(problems))

text = json.dumps(doc, separators=(",", ":"), ensure_ascii=True)
delim = "mm_openapi"
if ")" + delim + '"' in text:
    sys.exit(f"{src}: the text contains the raw string's delimiter")
cpp = ("// Generated from docs/openapi.yaml by cmake/openapi_to_cpp.py: do not edit.\n"
       "#include <string>\n\nnamespace mm {\n\nconst std::string& openapi_json() {\n"
       f"  static const std::string text = R\"{delim}({text}){delim}\";\n"
       "  return text;\n}\n\n} // namespace mm\n")
old = None
if os.path.exists(out):
    with open(out, encoding="utf-8") as f:
        old = f.read()
if old != cpp:
    with open(out, "w", encoding="utf-8") as f:
        f.write(cpp)
