"""Fake secrets of every kind redaction must catch, built at run time from random characters so
that no scanner finds a secret in this repository (and none of them was ever valid).

Each kind gives the text an agent would see (`text`) and the parts of it that must never be
stored (`secrets`); a secret inside a line that goes on after it (a command line, a connection
string) also gives what redaction must make of that line (`redacted`): the secret replaced and
not one other character changed. ORDINARY_TEXTS is the other half: text with the same words and
punctuation that holds no secret, which redaction must return exactly as it is.
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
    redacted: str | None = None  # redact_text(text) exactly, when the text goes on after the secret

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

    def in_context(name: str, text: str, secret: str) -> None:
        kinds.append(SecretKind(name, text, (secret,), text.replace(secret, "[REDACTED]")))

    def typed(punctuation: str) -> str:
        """A password as people type them: letters, digits and punctuation, too low in entropy
        and too short for gitleaks' generic rule, and with characters its values cannot hold."""
        return r(string.ascii_letters, 5) + punctuation + r(ALNUM, 4) + r(string.digits, 2)

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
    # Passwords with punctuation in command lines and connection strings, followed by more text
    # (issue 24, item 2: one such password was found 47 times in a pg_dump).
    secret = typed("!")
    in_context("mysql-password-option", f"mysql -u root --password={secret} app_db", secret)
    secret = typed("#")
    in_context("mysql-short-option-quoted", f"mysqldump -uroot -p'{secret}' app_db > dump.sql", secret)
    secret = typed("!")
    in_context("mysql-short-option", f"mysql -h db.internal -uroot -p{secret} app_db", secret)
    secret = typed("!")
    in_context("pgpassword-env", f"PGPASSWORD={secret} psql -h db.internal -U app app_db", secret)
    secret = typed("%")
    in_context("mysql-pwd-env", f"MYSQL_PWD={secret} mysql -u root app_db", secret)
    secret = typed("^")
    in_context("export-api-token", f"export API_TOKEN={secret} && make deploy", secret)
    secret = typed("*")
    in_context("java-system-property", f"java -Dspring.datasource.password={secret} -jar app.jar", secret)
    secret = typed("!")
    in_context("curl-user-password", f"curl -u admin:{secret} https://api.internal/v1/health", secret)
    secret = typed("@") + "!"
    in_context("url-password-with-at", f"git clone https://deploy:{secret}@git.internal/app.git", secret)
    secret = typed("!")
    in_context("jdbc-url", f"jdbc:postgresql://db.internal:5432/app?user=app&password={secret}&ssl=true", secret)
    secret = typed("$$") + "!"
    in_context("odbc-connection-string",
               f"Driver={{ODBC Driver 18 for SQL Server}};Server=db.internal;Uid=sa;Pwd={secret};Encrypt=yes", secret)
    secret = typed("!")
    in_context("netrc", f"machine git.internal\n  login deploy\n  password {secret}\n", secret)
    secret = typed("!")
    in_context("docker-login", f"docker login -u deploy -p {secret} registry.internal", secret)
    return kinds


# Text with the keywords and punctuation of the kinds above that is no secret: flags that name a
# file or read stdin, prompts, references to variables, user:group and port pairs, placeholders.
ORDINARY_TEXTS = (
    "--password-file=/run/secrets/db",
    "mysql -u root -p app_db",
    "mysql -u root db",
    'mysql -uroot -p"$MYSQL_PASSWORD" app_db',
    "mysql --protocol=tcp -P 3306 -h db.internal -u root -p",
    "PGPASSWORD=$PGPASSWORD psql -h db.internal -U app",
    "pg_dump --no-password -h db.internal app_db > dump.sql",
    'echo "$REGISTRY_PASSWORD" | docker login -u deploy --password-stdin registry.internal',
    "docker login registry.internal && docker run -p 8080:80 -u 1000:1000 app",
    "docker run --user root:root -p 127.0.0.1:5432:5432 postgres:16",
    "ssh -p 2222 deploy@git.internal",
    "mkdir -p /tmp/build-2024",
    "chown www-data:www-data /var/www && chown user:group file",
    "http://localhost:8000",
    "see https://example.com/a@b and https://user@git.internal/app.git",
    "git@github.com:org/repo.git",
    "postgres://app@db.internal:5432/app_db",
    "the password=policy document",
    "password: (hidden)",
    "Password for 'https://deploy@git.internal':",
    'FATAL:  password authentication failed for user "app"',
    'curl -u "$API_USER:$API_PASSWORD" https://api.internal/v1/health',
    "curl -u user:password https://api.internal/v1/health",
    "curl -s -o /dev/null -w '%{http_code}' http://localhost:8000/health",
    "jdbc:postgresql://db.internal:5432/app?user=app&ssl=true",
    "Server=db.internal;Database=app;Trusted_Connection=yes;",
    "machine git.internal login deploy",
    "a machine learning login page password reset flow",
    "export PATH=/usr/local/bin:$PATH && make deploy",
    "export API_TOKEN=$(cat /run/secrets/api_token) && make deploy",
    "--token-file=/var/run/secrets/token --api-key-env=OPENAI_API_KEY",
    "max_tokens=4096 token_count=1234 --max-tokens 4096",
    "connect(host=host, password=password, timeout=30)",
    "requests.get(url, auth=(user, pw), timeout=5)",
    "login(password=form.cleaned_data['password'])",
    "redis-cli -h cache.internal -p 6379 ping",
    "sshpass -f /run/secrets/ssh ssh deploy@git.internal",
    "docker build --secret id=npmrc,src=$HOME/.npmrc -t app:1.2 .",
    # From a scan of this machine's Python packages with the rules above (awscli's examples, rich, httpx, moto).
    "aws ec2 run-instances --client-token 550e8400-e29b-41d4-a716-446655440000 --image-id ami-0abc12",
    "aws logs put-log-events --sequence-token 49542672486831074009579604567656788214 --starting-token eyJ0IjogMX0=",
    "aws wafv2 delete-ip-set --lock-token 46851772-db6f-459d-9385-49428812e357",
    "aws acm export-certificate --passphrase file://path-to-passphrase-2 --private-key fileb://key2.pem",
    'print(f"password={password!r}") and f"(pos={self.pos}, token={len(self.tokens)})"',
    'httpx.URL("https://example.com", username="jo@gmail.com", password="a secret")',
    "Authorization: AWS4-HMAC-SHA256 Credential=mock_access_key/20220524/us-east-1/s3/aws4_request, SignedHeaders=host",
)
