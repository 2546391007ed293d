"""Redaction rules for secrets recognised by their context: storage keys and SAS tokens,
URL passwords, authorization headers and cookies, `password=` style assignments, secret
environment names, and personal data (e-mail addresses, user paths, IP addresses, host
names).

The fields of an entry are described in app/core/redaction/rules.py, which runs these rules
after the token shapes of app/core/redaction/token_shapes.py.
"""

from __future__ import annotations

from typing import Any

BY_CONTEXT: list[dict[str, Any]] = [
    {
        "type": "azure-storage-key",
        "pattern": r"AccountKey=([A-Za-z0-9+/=]{86,88})",
        "group": 1,
        "hints": ["accountkey="],
        "positive": [
            "DefaultEndpointsProtocol=https;AccountName=ml;AccountKey="
            + "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
            + ";EndpointSuffix=core.windows.net"
        ],
        "negative": ["AccountKey=<your key>"],
    },
    {
        "type": "azure-sas-token",
        "pattern": r"(?i)[?&;]sig=([A-Za-z0-9%/+=]{30,200})",
        "group": 1,
        "hints": ["sig="],
        "positive": [
            "GET https://ml.blob.core.windows.net/data/x.tar?sv=2022-11-02&se=2026-01-01&sp=r"
            "&sig=Qb4fK9x2mZ7nR5tY8wV3cL1pJ6hG0dS4aE2uI%2BoP%3D"
        ],
        "negative": ["&sig=short"],
    },
    {
        "type": "url-password",
        # scheme://user:password@ : postgresql://, redis://, mongodb+srv://, MLflow tracking URIs.
        # The user may be empty: redis://:PASSWORD@host is how Redis URLs carry a password alone.
        "pattern": r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s:/?#@]{0,256}:([^\s@/]{1,256})@",
        "group": 1,
        "hints": ["://"],
        "positive": [
            "sqlalchemy.exc.OperationalError: postgresql://mlops:Sup3rS3cret!@db.example.com:5432/runs",
            "REDIS_URL=redis://default:hunter22@10.0.3.4:6379/0",
            "celery broker redis://:Zx81hunter22@cache:6379/0",
        ],
        "negative": ["Downloading https://huggingface.co/gpt2/resolve/main/config.json"],
    },
    {
        "type": "url-token",
        # Secrets in a URL's query string: ?token=, &access_token=, ?api_key=, ?key= (Google APIs),
        # X-Amz-Signature and friends (presigned URLs). Sentry Relay's URL scrubbing; gitleaks generic-api-key.
        "pattern": r"(?i)[?&](?:(?:access|auth|refresh|id|private|session|api)[_-]?token|token|api[_-]?key|apikey"
        r"|key|password|passwd|pwd|secret|client[_-]?secret|signature|x-amz-signature|x-amz-security-token"
        r"|x-amz-credential|x-goog-signature|x-goog-credential|code)=([^&\s\"'#<>]{4,1000})",
        "group": 1,
        "guard": "value",
        "hints": ["?", "&"],
        "positive": [
            "GET https://api.example.org/v1/runs?token=9f8e7d6c5b4a3928&limit=5 -> 401",
            "wget https://storage.example.com/ckpt.pt?X-Amz-Signature=3f2a9c0d8e7b6a5f4e3d2c&X-Amz-Date=1",
            "https://generativelanguage.googleapis.com/v1/models?key=Zq8sDRmQ1abcdefgh",
        ],
        "negative": ["GET /v1/runs?limit=5&page=2", "?token=${TOKEN}", "https://host/x?key=null"],
    },
    {
        "type": "password",
        # curl -u user:password (also --user, -uuser:pass): only the password after the colon.
        "pattern": r"\bcurl\b[^\n]{0,200}?[ \t](?:-u[ \t]{0,4}|--user(?:[ \t]{1,4}|=))[\"']?[^\s:\"']{0,256}:"
        r"([^\s\"']{1,256})",
        "group": 1,
        "guard": "value",
        "hints": ["curl"],
        "positive": [
            "curl -u admin:Hunter22x https://registry.example.org/v2/",
            "+ curl -sS --user 'ci-bot:9f8e7d6c5b4a' -X POST https://example.org",
        ],
        "negative": ["curl -u admin: https://example.org", "curl -u $USER:$PASS https://example.org"],
    },
    {
        "type": "password",
        # sshpass -p PASSWORD (also glued: -pPASSWORD); -e and -f read it from elsewhere, -P is a prompt.
        "pattern": r"\bsshpass\b[^\n]{0,200}?[ \t]-p[ \t]{0,4}[\"']?([^\s\"'-][^\s\"']{0,255})",
        "group": 1,
        "guard": "value",
        "hints": ["sshpass"],
        "positive": ["sshpass -p Hunter22x ssh ubuntu@gpu-node", "sshpass -p'Zx81pass' rsync -a ckpt/ host:ckpt/"],
        "negative": ["sshpass -e ssh ubuntu@gpu-node", "sshpass -f ~/.pw ssh host", "sshpass -P assword ssh host"],
    },
    {
        "type": "password",
        # A bare --token flag, and the Hugging Face Hub's --hub_token / --hub-token (transformers,
        # huggingface-cli): `--token VALUE` or `--token=VALUE`. Only with no other word before
        # `token`: --pad-token and --mask-token name special tokens, not secrets.
        "pattern": r"(?i)(?:^|[\s\"'])--(?:token|hub[_-]token|hub[_-]api[_-]token)(?:[ \t]{1,4}|=)[\"']?"
        r"([^\s\"']{4,256})",  # a command line's value ends at a space: commas and semicolons are part of it
        "group": 1,
        "guard": "value",
        "hints": ["token"],
        "positive": [
            "huggingface-cli login --token Zq8sDRmQ1abcdefghXYZ",
            "python run_clm.py --push_to_hub --hub_token Zq8sDRmQ1abcdefgh --output_dir out",
            "vault login --token=s.Zq8sDRmQ1abcdefgh",
        ],
        "negative": ["--mask-token [MASK] --pad-token <pad>", "--token $HF_TOKEN", "--tokenizer gpt2", "--token None"],
    },
    {
        "type": "authorization",
        "pattern": r"(?i)\b(?:proxy-)?authorization[\"']?\s{0,4}[:=]\s{0,4}[\"']?"
        r"(?:(?:bearer|basic|token|apikey|digest)\s{1,4})?"
        r"([A-Za-z0-9._~+/=-]{8,1000})",
        "group": 1,
        "hints": ["authorization"],
        "positive": ["-H 'Authorization: Basic dXNlcjpwYXNzd29yZA=='", "authorization=Zm9vYmFyYmF6cXV4"],
        "negative": ["Authorization failed: check your credentials"],
    },
    {
        "type": "bearer-token",
        "pattern": r"(?i)\bbearer\s{1,4}([A-Za-z0-9._~+/=-]{8,1000})",
        "group": 1,
        "guard": "not_word",
        "hints": ["bearer"],
        "positive": ["requests.get(url, headers={'X-Auth': 'Bearer 9f8e7d6c5b4a3928.17f6'})"],
        "negative": ["the bearer stopped responding"],
    },
    {
        "type": "cookie",
        # Cookie and Set-Cookie headers carry session ids: the whole value goes (curl --cookie too).
        "pattern": r"(?i)(?:\b(?:set-)?cookie[\"']?\s{0,4}:|--cookie(?:\s{1,4}|=))\s{0,4}[\"']?([^\r\n\"']{4,})",
        "group": 1,
        "guard": "value",
        "hints": ["cookie"],
        "positive": [
            "Cookie: session=8f14e45fceea167a5a36dedd4bea2543; theme=dark",
            "< Set-Cookie: sessionid=38afes7a8x9; HttpOnly; Path=/",
            "curl --cookie 'session=8f14e45fceea167a5' https://ml.example.org/api",
        ],
        "negative": ["cookie: None", "cookies saved to jar", "Set-Cookie header missing"],
    },
    {
        "type": "password",
        # Registry logins that take the secret as an argument: `docker login -u bot -p VALUE`
        # (also podman, buildah, nerdctl, skopeo, helm registry, oras); `--password-stdin` is safe.
        "pattern": r"\b(?:docker|podman|buildah|nerdctl|skopeo|oras|helm[ \t]{1,4}registry)[ \t]{1,4}login\b"
        r"[^\n]{0,200}?[ \t](?:-p|--password)(?:[ \t]{1,4}|=)[\"']?([^\s\"']{1,256})",
        "group": 1,
        "guard": "value",
        "hints": ["login"],
        "positive": [
            "docker login -u bot -p s3cr3tPassw0rd registry.example.com",
            "+ podman login quay.io --username bot --password Hunter22x",
        ],
        "negative": [
            "docker login -u bot --password-stdin registry.example.com",
            "docker login -u bot -p $REGISTRY_PASSWORD",
            "WARNING! Using --password via the CLI is insecure. Use --password-stdin.",
        ],
    },
    {
        "type": "password",
        # MySQL/MariaDB clients take the password glued to -p (`mysql -uroot -pSECRET`); a bare
        # `-p` prompts, and `-P` is the port (MySQL docs, "Specifying a password on the command line").
        "pattern": r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mysqlshow|mysqlsh|mariadb"
        r"|mariadb-dump|mariadb-admin)\b[^\n]{0,200}?[ \t]-p[\"']?([^\s\"'-][^\s\"']{0,255})",
        "group": 1,
        "guard": "value",
        "hints": ["mysql", "mariadb"],
        "positive": ["mysql -u root -pSECRETpass1 mydb", "mysqldump -h db -uroot -p'Sup3r' runs > dump.sql"],
        "negative": ["mysql -u root -p mydb", "mysql -h db -P 3306 -u root", "mysqld: ready for connections"],
    },
    {
        "type": "password",
        # The space form of command-line secrets: `--password VALUE`, `--api-key VALUE`, `--hf-token VALUE`.
        "pattern": r"(?i)(?:^|[\s\"'])--?(?:[a-z0-9]{1,20}[_-])?(?:password|passwd|pwd|secret|api[_-]?key"
        r"|access[_-]?key|client[_-]?secret"
        r"|(?:hf|hub|wandb|api|auth|access|refresh|session|github|gh|slack|bot|bearer|secret|oauth|personal)[_-]?token)"
        r"[ \t]{1,4}[\"']?([^\s\"',;]{4,256})",
        "group": 1,
        "guard": "value",
        "hints": ["pass", "pwd", "secret", "key", "token"],
        "positive": [
            "mysql --user root --password hunter22 -h db",
            "python upload.py --hf-token abcd1234efgh --repo org/model",
            "launch.sh --api-key 9f8e7d6c5b4a",
        ],
        "negative": [
            "Using --password via the CLI is insecure",
            "--password-file /run/secrets/db --max-new-tokens 2048",
            "--pad-token <pad> --api-key $API_KEY",
            "--eos-token None",
        ],
    },
    {
        "type": "password",
        # password= / token= / secret= style assignments (no bare `token`: ML logs use it constantly).
        "pattern": r"(?i)(?:password|passwd|[a-z0-9]{1,20}[_-]pwd|secret|api[_-]?key|apikey|access[_-]?key"
        r"|private[_-]?key|client[_-]?secret|credentials?"
        r"|(?:hf|hub|wandb|api|auth|access|refresh|session|github|gh|slack|bot|bearer|secret|oauth|personal)[_-]?token)"
        r"[a-z0-9_.-]{0,20}[\"']?[ \t]{0,4}[:=][ \t]{0,4}[\"']?([^\s\"',;]{4,256})",
        "group": 1,
        "guard": "value",
        "hints": ["pass", "pwd", "secret", "key", "credential", "token"],
        "positive": [
            "mysql --user=root --password=hunter22",
            "auth_token: 'c2VjcmV0LXZhbHVl'",
            '{"client_secret": "f3a9-2b7c-d1e0"}',
            "TrainingArguments(hub_token=Zq8sDRmQ1abcdefgh, push_to_hub=True)",
        ],
        "negative": [
            "password=None",
            "api_key: ${API_KEY}",
            "max_tokens=2048 pad_token=<pad>",
            "Warning: secret_key is not set",
        ],
    },
    {
        "type": "env-secret",
        # NAME=value lines of an environment dump, when NAME says it holds a secret.
        "pattern": r"^[ \t]{0,16}(?:export[ \t]{1,4})?([A-Z][A-Z0-9_]{0,127})=(\S{1,1000})",
        "group": 2,
        "guard": "secret_env_name",
        "hints": ["="],
        "positive": ["export MY_TOKEN=c9d8e7f6a5b4", "SIGNING_AUTH_KEY=letmein123"],
        "negative": ["TOKENIZERS_PARALLELISM=false", "MAX_TOKENS=4096", "OLDPWD=/home", "CUDA_VISIBLE_DEVICES=0,1"],
    },
    {
        "type": "email",
        "pattern": r"\b[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[a-zA-Z0-9-]{1,63}(?:\.[a-zA-Z0-9-]{1,63}){0,8}"
        r"\.[a-zA-Z]{2,24}\b",
        "group": 0,
        "guard": "email",
        "hints": ["@"],
        "positive": ["Submitted by alice.smith@example.com", "git config user.email bob+ml@corp.example.org"],
        "negative": ["torch.compile(@torch.no_grad)", "model@step1000.pt"],
    },
    {
        "type": "user-path",
        # Only the user name is replaced: /home/[REDACTED:user-path]/runs/train.py keeps the path readable.
        "pattern": r"(?i)(?:\b[a-z]:[\\/](?:users|documents and settings)[\\/]|/(?:home|users)/)"
        r"([^/\\\r\n\x00\s:\"']{1,128})",
        "group": 1,
        "hints": ["/home/", "/users/", "\\users\\", "documents and settings"],
        "positive": ['File "/home/alice/project/train.py", line 12', r"C:\Users\bob\miniconda3\python.exe"],
        "negative": ["/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py"],
    },
    {
        "type": "ipv4",
        "pattern": r"\b(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\b",
        "group": 0,
        "guard": "ip",
        "rule_group": "network",
        "hints": ["."],
        "positive": ["NCCL INFO NET/Socket : Using [0]eth0:10.42.0.17<0>", "connect to 192.168.1.20:29500 failed"],
        "negative": ["cuDNN version 8.9.2.26", "listening on 127.0.0.1:8000", "torch==2.1.0.1"],
    },
    {
        "type": "ipv6",
        # A compressed address (`::`) must begin with a full group in the ranges hosts get:
        # 2000::/3 global, fc00::/7 unique local, fe80::/10 link-local, ff00::/8 multicast
        # (RFC 4291, 4193). `step 10::20`, `Feb::12`, `0A::add` and C++ `c10::` are not addresses.
        "pattern": r"(?i)(?:\b(?:[0-9a-f]{1,4}:){7}[0-9a-f]{1,4}\b"
        r"|\b[23f][0-9a-f]{3}:(?:[0-9a-f]{1,4}:){0,5}(?::[0-9a-f]{1,4}){1,6}\b)",
        "group": 0,
        "guard": "ipv6",
        "rule_group": "network",
        "hints": [":"],
        "positive": [
            "bind to [fe80::1ff:fe23:4567:890a]:29500",
            "2001:0db8:85a3:0000:0000:8a2e:0370:7334 unreachable",
            "NCCL INFO NET/Socket : Using [0]eth0:fd12:3456:789a:1::1<0>",
            "connect to [2001:db8::1]:29500 failed",
            "peer fe80::1 down",
        ],
        "negative": [
            "c10::Error at 12:34:56",
            "std::vector<at::Tensor>",
            "listening on ::1",
            "step 10::20",
            "Feb::12 rotated",
            "0A::add",
            "2024-12-01 03:14:21",
        ],
    },
    {
        "type": "hostname",
        "pattern": r"(?i)\b[a-z0-9][a-z0-9-]{0,62}(?:\.[a-z0-9-]{1,63}){0,6}\.(?:internal|local|lan|corp|intranet)\b",
        "group": 0,
        "rule_group": "network",
        "hints": [".internal", ".local", ".lan", ".corp", ".intranet"],
        "positive": ["Connection refused: gpu-node-17.cluster.local:29500", "mlflow at tracking.ml.corp"],
        "negative": ["self.local_rank = 0", "model.lang_head"],
    },
]
