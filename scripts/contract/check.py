#!/usr/bin/env python3
"""Checks livedata's contract documents and real traffic against them.

    check.py documents                      both documents against their specifications,
                                            and every example in them against its schema
    check.py payloads FILE [--prefix P] [--expect KIND,...]
                                            MQTT messages captured from a broker (JSON lines:
                                            {"topic", "payload" (base64)}) against
                                            docs/asyncapi.yaml
    check.py http FILE                      HTTP responses (JSON lines: {"method", "path",
                                            "status", "contentType", "body"}) against
                                            docs/openapi.yaml

A mismatch is printed with the message's topic (or the request) and the path of the
mismatch inside the payload; the exit status is 1 when anything failed. An HTTP response with
an array of more than 300 items is checked on a sample of the array's items (the first and last
hundred, and a hundred between) once one of the same operation and status was checked whole.
"""

import argparse
import base64
import copy
import json
import pathlib
import re
import sys

import jsonschema
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7, DRAFT202012

ROOT = pathlib.Path(__file__).resolve().parents[2]
ASYNCAPI = ROOT / "docs" / "asyncapi.yaml"
OPENAPI = ROOT / "docs" / "openapi.yaml"
ASYNCAPI_SCHEMA = pathlib.Path(__file__).resolve().parent / "asyncapi-3.0.0.schema.json"


def load(path):
    with open(path, encoding="utf-8") as file:
        return yaml.safe_load(file)


def where(error):
    """`$.style.polygonFillColor` for an error's place in the instance."""
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)


def best(errors):
    errors = list(errors)
    return jsonschema.exceptions.best_match(errors) if errors else None


def registry():
    """Both documents by their file URIs: the OpenAPI document's schemas refer to the AsyncAPI one's."""
    resources = [(ASYNCAPI, DRAFT7), (OPENAPI, DRAFT202012)]
    return Registry().with_resources(
        (path.as_uri(), Resource(contents=load(path), specification=specification)) for path, specification in resources)


class Document:
    """One of the two documents, with validators for its schemas that resolve their `$ref`s."""

    def __init__(self, path, specification):
        self.path = path
        self.uri = path.as_uri()
        self.tree = load(path)
        self.specification = specification
        self.registry = registry()
        self.validator_class = jsonschema.Draft7Validator if specification is DRAFT7 else jsonschema.Draft202012Validator
        self.validators = {}

    def resolve(self, node):
        while isinstance(node, dict) and "$ref" in node and len(node) == 1:
            node = self.pointer(node["$ref"])
        return node

    def pointer(self, ref):
        node = self.tree
        for part in ref.lstrip("#/").split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def absolute(self, node):
        """The schema with its `$ref`s made absolute, so that they resolve in the registry's documents."""
        if isinstance(node, dict):
            return {key: (self.anchor(value) if key == "$ref" else self.absolute(value)) for key, value in node.items()}
        if isinstance(node, list):
            return [self.absolute(value) for value in node]
        return node

    def anchor(self, ref):
        document, _, pointer = ref.partition("#")
        base = self.uri if not document else (self.path.parent / document).resolve().as_uri()
        return f"{base}#{pointer}"

    def validator(self, schema):
        """One validator a schema (a node of the document, which lives as long as it does)."""
        made = self.validators.get(id(schema))
        if made is None:
            made = self.validator_class(self.absolute(schema), registry=self.registry, format_checker=jsonschema.FormatChecker())
            self.validators[id(schema)] = made
        return made


# ---------------------------------------------------------------------------- AsyncAPI


class AsyncAPI(Document):
    def __init__(self, prefix="livedata"):
        super().__init__(ASYNCAPI, DRAFT7)
        self.channels = []
        for name, channel in self.tree["channels"].items():
            address = channel["address"]
            pattern = ""
            for part in re.split(r"(\{[^}]+\})", address):
                if part == "{prefix}":
                    pattern += re.escape(prefix)
                elif part.startswith("{"):
                    pattern += "[^/]+"
                else:
                    pattern += re.escape(part)
            messages = {key: self.resolve(message) for key, message in channel.get("messages", {}).items()}
            self.channels.append((name, re.compile(f"^{pattern}$"), messages))
        self.default_type = self.tree.get("defaultContentType", "application/json")

    def channel(self, topic):
        """The channel a topic belongs to: the most specific (longest literal) of those that match."""
        found = [(name, messages) for name, pattern, messages in self.channels if pattern.match(topic)]
        if not found:
            return None, {}
        # A style topic also has seven levels; a prefixed channel wins over the live updates'.
        found.sort(key=lambda item: item[0] == "liveUpdate")
        return found[0]

    def instance(self, message, payload_bytes):
        """The payload as the message's schema sees it: parsed JSON, or the text."""
        content_type = message.get("contentType", self.default_type)
        text = payload_bytes.decode("utf-8")
        if content_type == "application/json":
            return json.loads(text)
        return text

    def check(self, topic, payload_bytes):
        """(message name, None) when the payload is one of its channel's messages, else (None, reason)."""
        name, messages = self.channel(topic)
        if name is None:
            return None, "no channel of docs/asyncapi.yaml has this topic"
        # A live update's message is its domain's (`x-domain`), else the one for any other
        # domain (`x-domain: '*'`); messages without `x-domain` (a removal) apply to all.
        domains = {message.get("x-domain") for message in messages.values()} - {None, "*"}
        if domains:
            wanted = topic.rsplit("/", 1)[-1]
            wanted = wanted if wanted in domains else "*"
            messages = {key: message for key, message in messages.items() if message.get("x-domain") in (None, wanted)}
        failures = []
        for key, message in messages.items():
            try:
                instance = self.instance(message, payload_bytes)
            except (UnicodeDecodeError, json.JSONDecodeError) as error:
                failures.append((key, f"not {message.get('contentType', self.default_type)}: {error}", 0))
                continue
            schema = self.resolve(message["payload"])
            error = best(self.validator(schema).iter_errors(instance))
            if error is None:
                return f"{name}.{key}", None
            failures.append((key, f"{where(error)}: {error.message}", len(list(error.absolute_path)) + 1))
        # The message that came closest (the deepest mismatch) explains the failure best.
        key, reason, _ = max(failures, key=lambda failure: failure[2])
        return None, f"channel {name}, as message {key}: {reason}"

    def examples(self):
        problems = []
        for name, message in self.tree["components"]["messages"].items():
            schema = self.resolve(message["payload"])
            for example in message.get("examples", []):
                if "payload" not in example:
                    continue
                instance = example["payload"]
                content_type = message.get("contentType", self.default_type)
                if content_type != "application/json" and not isinstance(instance, str):
                    problems.append(f"asyncapi: message {name}, example {example.get('name')}: a {content_type} example must be text")
                    continue
                for error in self.validator(schema).iter_errors(instance):
                    problems.append(f"asyncapi: message {name}, example {example.get('name')}: {where(error)}: {error.message}")
        return problems


def check_asyncapi_document():
    tree = load(ASYNCAPI)
    schema = json.loads(ASYNCAPI_SCHEMA.read_text())
    validator = jsonschema.Draft7Validator(schema)
    problems = [f"asyncapi: {where(error)}: {error.message}" for error in validator.iter_errors(tree)]
    return problems + AsyncAPI().examples()


# ---------------------------------------------------------------------------- OpenAPI


# An array longer than this is checked on a sample of its items (the first and last hundred
# and a hundred spread between), once a response of the same operation and status was
# checked whole: tests poll floors of 50,000 locations, and every item of every poll adds
# nothing but minutes.
SAMPLED_ITEMS = 300


def sampled(value):
    """The instance with each long array cut down to a sample of its items."""
    if isinstance(value, dict):
        return {key: sampled(item) for key, item in value.items()}
    if isinstance(value, list):
        if len(value) > SAMPLED_ITEMS:
            third = SAMPLED_ITEMS // 3
            step = (len(value) - 2 * third) / third
            value = value[:third] + [value[third + int(i * step)] for i in range(third)] + value[-third:]
        return [sampled(item) for item in value]
    return value


def has_long_array(value):
    if isinstance(value, dict):
        return any(has_long_array(item) for item in value.values())
    if isinstance(value, list):
        return len(value) > SAMPLED_ITEMS or any(has_long_array(item) for item in value)
    return False


class OpenAPI(Document):
    def __init__(self):
        super().__init__(OPENAPI, DRAFT202012)
        # Operations and statuses with a response of long arrays checked whole; later ones are sampled.
        self.checked_whole = set()
        self.sampled = 0
        self.routes = []
        for template, item in self.tree["paths"].items():
            pattern = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template))
            self.routes.append((template, re.compile(f"^{pattern}$"), item))
        # Literal paths before templated ones (`/v1/layers` before `/v1/layers/{name}`).
        self.routes.sort(key=lambda route: route[0].count("{"))

    def operation(self, method, path):
        for template, pattern, item in self.routes:
            if pattern.match(path) and method.lower() in item:
                return template, item[method.lower()]
        return None, None

    def check(self, method, path, status, content_type, body):
        template, operation = self.operation(method, path)
        if operation is None:
            return f"no operation {method} {path} in docs/openapi.yaml"
        responses = operation["responses"]
        response = responses.get(str(status)) or responses.get(f"{str(status)[0]}XX") or responses.get("default")
        if response is None:
            return f"{method} {template}: status {status} is not documented"
        response = self.resolve(response)
        media_types = response.get("content", {})
        if not media_types:
            return None if not body else f"{method} {template} {status}: a body where the document has none"
        base_type = (content_type or "").split(";")[0].strip()
        media = next((value for key, value in media_types.items() if key.split(";")[0].strip() == base_type), None)
        if media is None:
            return f"{method} {template} {status}: content type {content_type!r} is not one of {sorted(media_types)}"
        schema = media.get("schema")
        if base_type == "application/json":
            try:
                instance = json.loads(body)
            except json.JSONDecodeError as error:
                return f"{method} {template} {status}: not JSON: {error}"
            if schema is not None:
                validator = self.validator(schema)
                if has_long_array(instance):
                    key = (method, template, status)
                    if key in self.checked_whole:
                        self.sampled += 1
                        # A sample that fails is checked whole, for the item's own place in the path.
                        if best(validator.iter_errors(sampled(instance))) is None:
                            return None
                    self.checked_whole.add(key)
                error = best(validator.iter_errors(instance))
                if error is not None:
                    return f"{method} {template} {status}: {where(error)}: {error.message}"
        elif base_type == "text/event-stream":
            return self.check_events(f"{method} {template}", media, body)
        elif schema is not None:
            error = best(self.validator(schema).iter_errors(body))
            if error is not None:
                return f"{method} {template} {status}: {where(error)}: {error.message}"
        return None

    def check_events(self, what, media, body):
        """Each event of a Server-Sent Events body against `x-events`, by its name."""
        events = media.get("x-events", {})
        for block in body.split("\n\n"):
            name, data = "message", []
            for line in block.split("\n"):
                if line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].lstrip(" "))
            if not data:
                continue
            if name not in events:
                return f"{what}: event {name!r} is not one of {sorted(events)}"
            try:
                instance = json.loads("\n".join(data))
            except json.JSONDecodeError as error:
                return f"{what}: event {name}: not JSON: {error}"
            error = best(self.validator(events[name]).iter_errors(instance))
            if error is not None:
                return f"{what}: event {name}: {where(error)}: {error.message}"
        return None

    def examples(self):
        problems = []

        def walk(node, trail):
            if isinstance(node, dict):
                if "schema" in node and isinstance(node["schema"], dict):
                    schema = node["schema"]
                    samples = []
                    if "example" in node:
                        samples.append(("example", node["example"]))
                    for key, example in node.get("examples", {}).items():
                        example = self.resolve(example)
                        if "value" in example:
                            samples.append((key, example["value"]))
                    for key, value in samples:
                        for error in self.validator(schema).iter_errors(value):
                            problems.append(f"openapi: {trail} example {key}: {where(error)}: {error.message}")
                for key, value in node.items():
                    walk(value, f"{trail}/{key}")
            elif isinstance(node, list):
                for index, value in enumerate(node):
                    walk(value, f"{trail}/{index}")

        walk(self.tree["paths"], "paths")
        for name, schema in self.tree.get("components", {}).get("schemas", {}).items():
            for value in schema.get("examples", []):
                for error in self.validator(schema).iter_errors(value):
                    problems.append(f"openapi: schema {name} example: {where(error)}: {error.message}")
        return problems


def check_openapi_document():
    from openapi_spec_validator import validate
    from openapi_spec_validator.validation.exceptions import OpenAPIValidationError

    tree = load(OPENAPI)
    if not str(tree.get("openapi", "")).startswith("3.1"):
        return ["openapi: the document must be OpenAPI 3.1"]
    try:
        validate(copy.deepcopy(tree), base_uri=OPENAPI.as_uri())
    except OpenAPIValidationError as error:
        return [f"openapi: {error}"]
    return OpenAPI().examples()


# ---------------------------------------------------------------------------- commands


def lines(path):
    with open(path, encoding="utf-8") as file:
        for number, line in enumerate(file, 1):
            if line.strip():
                yield number, json.loads(line)


def command_documents(_):
    problems = check_asyncapi_document() + check_openapi_document()
    for problem in problems:
        print(problem)
    tree = load(ASYNCAPI)
    if load(OPENAPI)["info"]["version"] != tree["info"]["version"]:
        problems.append("the two documents carry different versions")
        print(problems[-1])
    print(f"documents: {len(problems)} problems (docs/asyncapi.yaml, docs/openapi.yaml)")
    return 1 if problems else 0


def command_payloads(arguments):
    document = AsyncAPI(prefix=arguments.prefix)
    seen, failed, count = {}, 0, 0
    for number, record in lines(arguments.file):
        count += 1
        payload = base64.b64decode(record["payload"])
        kind, reason = document.check(record["topic"], payload)
        if reason:
            failed += 1
            shown = payload[:200].decode("utf-8", "replace")
            print(f"MISMATCH {record['topic']}: {reason}\n    payload: {shown}")
        else:
            seen[kind] = seen.get(kind, 0) + 1
    missing = [kind for kind in arguments.expect.split(",") if kind and kind not in seen]
    for kind in missing:
        print(f"MISSING no payload of {kind} was captured")
    print("payloads by kind: " + ", ".join(f"{kind} {n}" for kind, n in sorted(seen.items())))
    print(f"payloads: {count} checked, {failed} mismatches, {len(missing)} kinds missing")
    return 1 if failed or missing or count == 0 else 0


def command_http(arguments):
    document = OpenAPI()
    failed, count, seen = 0, 0, set()
    for number, record in lines(arguments.file):
        count += 1
        reason = document.check(record["method"], record["path"].split("?")[0], record["status"], record.get("contentType"), record.get("body", ""))
        template, _ = document.operation(record["method"], record["path"].split("?")[0])
        seen.add(f"{record['method']} {template} {record['status']}")
        if reason:
            failed += 1
            print(f"MISMATCH {record['method']} {record['path']} -> {record['status']}: {reason}\n    body: {record.get('body', '')[:200]}")
    if document.sampled:
        print(f"http: {document.sampled} responses with an array of more than {SAMPLED_ITEMS} items, after the first of their"
              f" operation and status, checked on a sample of {SAMPLED_ITEMS} items of each")
    print(f"http: {count} responses checked ({len(seen)} distinct operation and status pairs), {failed} mismatches")
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("documents").set_defaults(run=command_documents)
    payloads = commands.add_parser("payloads")
    payloads.add_argument("file")
    payloads.add_argument("--prefix", default="livedata")
    payloads.add_argument("--expect", default="", help="message kinds (channel.message) that must be seen")
    payloads.set_defaults(run=command_payloads)
    http = commands.add_parser("http")
    http.add_argument("file")
    http.set_defaults(run=command_http)
    arguments = parser.parse_args()
    sys.exit(arguments.run(arguments))


if __name__ == "__main__":
    main()
