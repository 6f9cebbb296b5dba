"""Passwords with punctuation inside command lines, environment assignments and connection strings
(issue 24, item 2): the password is cut and the text around it, before and after, is kept to the
character; text with the same words and punctuation that holds no password is not touched."""

from __future__ import annotations

import pytest
from toolscope_agent.engine.redaction import is_secret_name, redact_identifier, redact_text, redact_value

from tests.secret_corpus import ORDINARY_TEXTS, secret_kinds

IN_CONTEXT = [kind for kind in secret_kinds() if kind.redacted is not None]


@pytest.mark.parametrize(("text", "expected"), [
    # The three forms of the issue, with the text after the password.
    ("mysql -u root --password=S3cure!Pass99 db", "mysql -u root --password=[REDACTED] db"),
    ("PGPASSWORD=Tr0ub4dor!3xY psql", "PGPASSWORD=[REDACTED] psql"),
    ("curl -u admin:Sup3r!Secret99 https://x", "curl -u admin:[REDACTED] https://x"),
    # Options, attached, quoted, separate.
    ("mysql -uroot -p'S3cure!Pass99' db", "mysql -uroot -p'[REDACTED]' db"),
    ("mysqldump -uroot -pS3cure!Pass99 db > db.sql", "mysqldump -uroot -p[REDACTED] db > db.sql"),
    ("mysql --password='S3cure!Pass99' db", "mysql --password='[REDACTED]' db"),
    ('pg_dump --dbname=app --password "S3cure!Pass99" -f dump.sql',
     'pg_dump --dbname=app --password "[REDACTED]" -f dump.sql'),
    ("vault login -method=userpass username=deploy password=S3cure!Pass99 && vault kv get x",
     "vault login -method=userpass username=deploy password=[REDACTED] && vault kv get x"),
    ("wget --user=deploy --password S3cure!Pass99 https://x/file.tgz",
     "wget --user=deploy --password [REDACTED] https://x/file.tgz"),
    ("openssl pkcs12 -export -passout pass:S3cure!Pass99 -out cert.p12",
     "openssl pkcs12 -export -passout pass:[REDACTED] -out cert.p12"),
    # Environment assignments before a command, exported, chained.
    ("MYSQL_PWD=S3cure!Pass99 mysql -u root db", "MYSQL_PWD=[REDACTED] mysql -u root db"),
    ("export API_TOKEN=S3cure!Pass99 && make", "export API_TOKEN=[REDACTED] && make"),
    ("export API_TOKEN=dG9rZW4hOTk5== && make", "export API_TOKEN=[REDACTED] && make"),
    ("PGPASSWORD=Tr0ub=4dor!3xY psql", "PGPASSWORD=[REDACTED] psql"),
    ("PGPASSWORD='Tr0ub4dor!3xY' psql -h db", "PGPASSWORD='[REDACTED]' psql -h db"),
    ("SSHPASS=S3cure!Pass99 sshpass -e ssh deploy@host", "SSHPASS=[REDACTED] sshpass -e ssh deploy@host"),
    ("REDISCLI_AUTH=S3cure!Pass99 redis-cli -h cache ping", "REDISCLI_AUTH=[REDACTED] redis-cli -h cache ping"),
    ("set DB_PASSWORD=S3cure!Pass99; run.cmd", "set DB_PASSWORD=[REDACTED]; run.cmd"),
    ("I set PGPASSWORD=Tr0ub4dor!3xY. Then psql worked.", "I set PGPASSWORD=[REDACTED]. Then psql worked."),
    # Logins of command-line clients.
    ("docker login -u user -p S3cure!Pass99 registry", "docker login -u user -p [REDACTED] registry"),
    ("podman login --username user --password=S3cure!Pass99 quay.io",
     "podman login --username user --password=[REDACTED] quay.io"),
    ("sshpass -p 'S3cure!Pass99' ssh deploy@host", "sshpass -p '[REDACTED]' ssh deploy@host"),
    ("redis-cli -h cache -a S3cure!Pass99 ping", "redis-cli -h cache -a [REDACTED] ping"),
    ("mongosh -u admin -p S3cure!Pass99 --authenticationDatabase admin",
     "mongosh -u admin -p [REDACTED] --authenticationDatabase admin"),
    ("sqlcmd -S db -U sa -P S3cure!Pass99 -Q 'SELECT 1'", "sqlcmd -S db -U sa -P [REDACTED] -Q 'SELECT 1'"),
    ("curl --user 'admin:Sup3r!Secret99' https://x", "curl --user [REDACTED] https://x"),  # gitleaks': the pair
    ("curl -sS -uadmin:Sup3r!Secret99 https://x", "curl -sS -uadmin:[REDACTED] https://x"),
    # URLs and connection strings.
    ("https://user:p@ss!word9@host/path", "https://user:[REDACTED]@host/path"),
    ("redis://:S3cure!Pass99@cache:6379/0", "redis://:[REDACTED]@cache:6379/0"),
    ("jdbc:postgresql://host/db?user=x&password=S3cure!Pass99&ssl=true",
     "jdbc:postgresql://host/db?user=x&password=[REDACTED]&ssl=true"),
    ("jdbc:sqlserver://host:1433;databaseName=app;user=sa;password=S3cure!Pass99;encrypt=true",
     "jdbc:sqlserver://host:1433;databaseName=app;user=sa;password=[REDACTED];encrypt=true"),
    ("jdbc:oracle:thin:scott/S3cure!Pass99@db:1521/ORCL", "jdbc:oracle:thin:scott/[REDACTED]@db:1521/ORCL"),
    ("Driver={ODBC Driver 18 for SQL Server};Server=x;Uid=sa;Pwd=S3cure!Pass99;",
     "Driver={ODBC Driver 18 for SQL Server};Server=x;Uid=sa;Pwd=[REDACTED];"),
    ("Server=x;Database=app;User Id=sa;Password={S3c;ure!Pass99};",
     "Server=x;Database=app;User Id=sa;Password={[REDACTED]};"),
    ("curl -d 'username=deploy&password=S3cure!Pass99' https://x/login",
     "curl -d 'username=deploy&password=[REDACTED]' https://x/login"),
    # .netrc, on one line and as a file.
    ("machine x login y password S3cure!Pass99", "machine x login y password [REDACTED]"),
    ('echo "machine git.internal login deploy password S3cure!Pass99" >> ~/.netrc',
     'echo "machine git.internal login deploy password [REDACTED]" >> ~/.netrc'),
    ("default login deploy password S3cure!Pass99\n", "default login deploy password [REDACTED]\n"),
])
def test_a_password_with_punctuation_is_cut_and_the_text_after_it_kept(text, expected):
    assert redact_text(text) == expected


@pytest.mark.parametrize("kind", IN_CONTEXT, ids=lambda k: k.name)
def test_the_corpus_lines_lose_their_secret_and_nothing_else(kind):
    assert redact_text(kind.text) == kind.redacted
    assert redact_text(f"$ {kind.text}\nexit 0") == f"$ {kind.redacted}\nexit 0"


@pytest.mark.parametrize("kind", IN_CONTEXT, ids=lambda k: k.name)
def test_the_corpus_lines_lose_their_secret_in_ids_and_keys(kind):
    (key,) = redact_value({kind.text: 1})
    assert kind.secrets[0] not in key and "[REDACTED:" in key


@pytest.mark.parametrize("text", ORDINARY_TEXTS)
def test_ordinary_text_with_the_same_words_and_punctuation_is_left_alone(text):
    assert redact_text(text) == text
    assert redact_text(f"$ {text}\nexit 0") == f"$ {text}\nexit 0"
    assert redact_value({"command": text}) == {"command": text}


@pytest.mark.parametrize("text", [t for t in ORDINARY_TEXTS if " " not in t])
def test_ordinary_ids_with_that_punctuation_are_left_alone(text):
    assert redact_identifier(text, max_length=200) == text


@pytest.mark.parametrize("name", ["PGPASSWORD", "MYSQL_PWD", "SSHPASS", "REDISCLI_AUTH", "dbpassword",
                                  "spring.datasource.password"])
def test_names_of_the_password_variables_of_command_line_clients(name):
    assert is_secret_name(name)


def test_each_password_of_adjacent_assignments_is_cut():
    text = "PGPASSWORD=Tr0ub4dor!3xY MYSQL_PWD=S3cure!Pass99 API_TOKEN=Sup3r!Secret99 make"
    assert redact_text(text) == "PGPASSWORD=[REDACTED] MYSQL_PWD=[REDACTED] API_TOKEN=[REDACTED] make"
