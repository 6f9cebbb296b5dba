"""Fake secrets of every kind redaction must catch, built at run time from random characters so
that no scanner finds a secret in this repository (and none of them was ever valid).

Each kind gives the text an agent would see (`text`) and the parts of it that must never be
stored (`secrets`).
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
BASE32 = string.ascii_uppercase + "234567"
BASE64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
HEX = "0123456789abcdef"


@dataclass(frozen=True)
class SecretKind:
    name: str
    text: str  # as it appears in a tool's output, an argument, a prompt
    secrets: tuple[str, ...]  # substrings that must be gone after redaction

    @property
    def short(self) -> bool:
        """Short enough to sit in an id (ids hold at most 200 characters)."""
        return len(self.text) <= 150 and "\n" not in self.text and " " not in self.text


def _b64url(data: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def _pem(rng: random.Random, label: str, lines: int = 6) -> tuple[str, str]:
    body = "\n".join("".join(rng.choices(BASE64, k=64)) for _ in range(lines))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----", body.split("\n")[1]


def secret_kinds(seed: int = 11) -> list[SecretKind]:
    rng = random.Random(seed)

    def r(alphabet: str, k: int) -> str:
        return "".join(rng.choices(alphabet, k=k))

    kinds: list[SecretKind] = []

    def add(name: str, text: str, *secrets: str) -> None:
        kinds.append(SecretKind(name, text, secrets or (text,)))

    add("aws-access-key-id", "AKIA" + r(BASE32, 16))
    aws_secret = r(BASE64, 40)
    add("aws-secret-access-key", f"aws_secret_access_key = {aws_secret}", aws_secret)
    add("github-pat", "ghp" + "_" + r(ALNUM, 36))
    add("github-fine-grained-pat", "github" + "_pat_" + r(ALNUM, 22) + "_" + r(ALNUM, 59))
    add("gitlab-pat", "glpat" + "-" + r(ALNUM, 20))
    add("slack-bot-token", "xoxb" + f"-{r(string.digits, 12)}-{r(string.digits, 13)}-{r(ALNUM, 24)}")
    webhook = f"T{r(BASE32, 10)}/B{r(BASE32, 10)}/{r(ALNUM, 24)}"
    add("slack-webhook", "https://hooks.slack.com/services/" + webhook, webhook)
    add("stripe-secret-key", "sk" + "_live_" + r(ALNUM, 24))
    add("openai-project-key", "sk" + "-proj-" + r(URLSAFE, 74) + "T3Blbk" + "FJ" + r(URLSAFE, 74))
    add("openai-short-key", "sk" + "-proj-" + r(ALNUM, 40))
    add("anthropic-api-key", "sk" + "-ant-api03-" + r(URLSAFE, 93) + "AA")
    add("google-api-key", "AI" + "za" + r(URLSAFE, 35))
    jwt = ".".join([_b64url({"alg": "HS256", "typ": "JWT"}),
                    _b64url({"sub": r(string.digits, 10), "name": "Jane Roe", "iat": 1716239022}), r(URLSAFE, 43)])
    add("jwt", jwt)
    rsa, rsa_line = _pem(rng, "RSA " + "PRIVATE KEY")
    add("rsa-private-key", rsa, rsa_line)
    ssh, ssh_line = _pem(rng, "OPENSSH " + "PRIVATE KEY")
    add("openssh-private-key", ssh, ssh_line)
    pgp_lines = ["".join(rng.choices(BASE64, k=64)) for _ in range(5)]
    pgp = ("-----BEGIN PGP " + "PRIVATE KEY BLOCK-----\n\n" + "\n".join(pgp_lines)
           + "\n=" + r(BASE64, 4) + "\n-----END PGP " + "PRIVATE KEY BLOCK-----")
    add("pgp-private-key-block", pgp, pgp_lines[1])
    db_password = r(ALNUM, 10) + "!" + r(ALNUM, 4)
    add("database-url", f"postgres://app:{db_password}@db.internal:5432/app", db_password)
    bearer = r(ALNUM + "._-", 40)
    add("bearer-token", "Authorization: " + "Bearer " + bearer, bearer)
    add("npm-token", "npm" + "_" + r(ALNUM, 36))
    add("pypi-token", "pypi" + "-AgEIcHlwaS5vcmc" + r(URLSAFE, 70))
    add("twilio-api-key", "SK" + r(HEX, 32))
    add("sendgrid-api-key", "SG" + "." + r(URLSAFE, 22) + "." + r(URLSAFE, 43))
    add("azure-ad-client-secret", r(ALNUM, 3) + r(string.digits, 1) + "Q" + "~" + r(ALNUM + "_-", 34))
    gcp_key, gcp_line = _pem(rng, "PRIVATE KEY", lines=8)
    service_account = json.dumps({"type": "service_account", "project_id": "acme-prod",
                                  "private_key_id": r(HEX, 40), "private_key": gcp_key + "\n",
                                  "client_email": "ci@acme-prod.iam.gserviceaccount.com"})
    add("gcp-service-account-json", service_account, gcp_line)
    add("huggingface-token", "hf" + "_" + r(string.ascii_letters, 34))
    add("shopify-access-token", "shp" + "at_" + r(HEX, 32))
    add("vault-token", "hvs" + "." + r(URLSAFE, 95))
    add("doppler-token", "dp" + ".pt." + r(LOWER_ALNUM, 43))
    add("linear-api-key", "lin" + "_api_" + r(ALNUM, 40))
    password = "Tr0ub" + r(ALNUM, 6) + "&3"
    add("password-assignment", f'password = "{password}"', password)
    env_password = r(ALNUM, 12) + "9"
    add("env-file-password", f"DB_PASSWORD={env_password}", env_password)
    return kinds
