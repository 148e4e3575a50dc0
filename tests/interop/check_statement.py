"""Checks provrun statements with the in-toto attestation reference library.

Usage: check_statement.py [--invalid] STATEMENT_JSON...

For each file: in-toto-attestation parses it as an in-toto v1 Statement and validates it
(at least one subject, each with a digest; the type and predicate type set), its
predicate parses as SLSA provenance v1, and `builder.id` and `buildType` are absolute
URIs (a scheme and an authority), as SLSA provenance v1 requires.

With --invalid, every file must instead be refused (a control: the checker can fail).
Prints one line per file and "STATEMENTS-OK" at the end; exits non-zero on any failure.
Run by crates/cli/tests/it/dsse_interop.rs in its throwaway virtualenv.
"""

import json
import sys
from urllib.parse import urlparse

from google.protobuf import json_format
from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement


def is_uri(value: str) -> bool:
    parsed = urlparse(value)
    return bool(parsed.scheme) and bool(parsed.netloc) and " " not in value


def check(path: str) -> str:
    with open(path, "rb") as f:
        text = f.read().decode("utf-8")
    pb = json_format.Parse(text, statement_pb2.Statement())
    Statement.copy_from_pb(pb).validate()
    if pb.predicate_type != "https://slsa.dev/provenance/v1":
        raise ValueError(f"predicate type {pb.predicate_type}")
    predicate = json_format.Parse(
        json_format.MessageToJson(pb.predicate), provenance_pb2.Provenance()
    )
    builder = predicate.run_details.builder.id
    build_type = predicate.build_definition.build_type
    if not is_uri(builder):
        raise ValueError(f"builder.id {builder!r} is not a URI")
    if not is_uri(build_type):
        raise ValueError(f"buildType {build_type!r} is not a URI")
    status = json.loads(text)["predicate"]["runDetails"]["byproducts"][0]["annotations"][
        "status"
    ]
    names = ", ".join(s.name for s in pb.subject)
    return f"{status}: valid, subjects [{names}], builder {builder}"


def main() -> None:
    args = sys.argv[1:]
    invalid = args[:1] == ["--invalid"]
    if invalid:
        args = args[1:]
    for path in args:
        try:
            line = check(path)
        except Exception as e:  # the library raises ValueError and protobuf errors
            if not invalid:
                raise
            print(f"refused as expected: {path}: {e}")
            continue
        if invalid:
            raise AssertionError(f"{path} was accepted: {line}")
        print(line)
    print("STATEMENTS-OK")


if __name__ == "__main__":
    main()
