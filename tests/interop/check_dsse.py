"""Checks a provrun bundle's signature and statement with independent implementations.

Usage: check_dsse.py BUNDLE PUBLIC_KEY_PEM PRIVATE_KEY_PEM

- securesystemslib (the DSSE implementation of in-toto and TUF) verifies
  BUNDLE/statement.dsse.json with the SPKI PEM public key, and refuses it once the
  payload is changed;
- pyca/cryptography reads the PKCS#8 PEM private key and derives the same public key, whose
  SHA-256 must be the key id the envelope names (of its 32 raw bytes for Ed25519, of its
  SPKI DER encoding for ECDSA P-256);
- the in-toto attestation reference library (in-toto-attestation) parses the envelope's
  payload, byte for byte statement.json, as an in-toto v1 Statement and validates it, and
  parses its predicate as SLSA provenance v1.

Prints one line per check and "INTEROP-OK" at the end; exits non-zero on any failure.
Run by crates/cli/tests/it/dsse_interop.rs in a throwaway virtualenv.
"""

import base64
import copy
import hashlib
import json
import sys

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from google.protobuf import json_format
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import SSlibKey


def main() -> None:
    bundle, public_path, private_path = sys.argv[1:4]
    with open(f"{bundle}/statement.dsse.json", "rb") as f:
        envelope_json = json.load(f)
    with open(f"{bundle}/statement.json", "rb") as f:
        statement_bytes = f.read()
    with open(public_path, "rb") as f:
        public_pem = f.read()
    with open(private_path, "rb") as f:
        private_pem = f.read()

    # The key files in the formats other tools read.
    public = serialization.load_pem_public_key(public_pem)
    private = serialization.load_pem_private_key(private_pem, password=None)
    if isinstance(public, ec.EllipticCurvePublicKey):
        assert public.curve.name == "secp256r1", public.curve.name
        encoding, form = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        scheme = "ecdsa-sha2-nistp256"
    else:
        encoding, form = serialization.Encoding.Raw, serialization.PublicFormat.Raw
        scheme = "ed25519"
    raw = public.public_bytes(encoding, form)
    derived = private.public_key().public_bytes(encoding, form)
    assert raw == derived, "the private key does not belong to the public key"
    keyid = hashlib.sha256(raw).hexdigest()
    named = [s["keyid"] for s in envelope_json["signatures"]]
    assert named == [keyid], f"envelope names {named}, the key's id is {keyid}"
    print(f"key files: PKCS#8 and SPKI PEM read by cryptography; {scheme} key id {keyid}")

    # DSSE with securesystemslib.
    key = SSlibKey.from_crypto(public, keyid=keyid, scheme=scheme)
    envelope = Envelope.from_dict(copy.deepcopy(envelope_json))
    assert envelope.payload_type == "application/vnd.in-toto+json", envelope.payload_type
    assert envelope.payload == statement_bytes, "payload is not statement.json"
    accepted = envelope.verify([key], 1)
    assert list(accepted) == [keyid], accepted
    print("dsse: securesystemslib verifies the envelope")

    tampered = copy.deepcopy(envelope_json)
    tampered["payload"] = base64.b64encode(statement_bytes + b" ").decode()
    try:
        Envelope.from_dict(tampered).verify([key], 1)
    except VerificationError:
        print("dsse: securesystemslib refuses a changed payload")
    else:
        raise AssertionError("a changed payload verified")

    # The statement with the in-toto attestation reference library.
    pb = json_format.Parse(envelope.payload.decode("utf-8"), statement_pb2.Statement())
    Statement.copy_from_pb(pb).validate()
    print(
        f"statement: in-toto v1 Statement, {len(pb.subject)} subject(s), "
        f"predicate {pb.predicate_type}"
    )
    if pb.predicate_type == "https://slsa.dev/provenance/v1":
        from in_toto_attestation.predicates.provenance.v1 import provenance_pb2

        predicate = json_format.MessageToJson(pb.predicate)
        json_format.Parse(predicate, provenance_pb2.Provenance())
        print("predicate: parses as SLSA provenance v1")
    print("INTEROP-OK")


if __name__ == "__main__":
    main()
