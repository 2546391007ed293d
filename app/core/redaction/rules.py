"""The secret-redaction rules, as data: one entry per kind of secret.

Each rule has a `type` (the placeholder says `[REDACTED:<type>]`), an RE2 pattern (no
lookaround, no backreferences, every repeat followed by a literal bounded), the group
that is replaced (0 = the whole match), an optional `guard` (a named false-positive check
in app/core/redaction/redactor.py, for patterns that are too loose alone), `hints` (lower-case
substrings one of which a line must contain for the rule to run: a cheap prefilter), the
`group` of rules it belongs to (`network` rules can be switched off), and test strings:
`positive` lines must be redacted by this rule, `negative` lines must come out unchanged
(tests/core/test_redact.py checks both). Derivations (gitleaks, trufflehog, detect-secrets,
Sentry Relay) are listed in docs of the rule where the shape is not obvious.

Order matters: specific token shapes come first, so `HF_TOKEN=hf_...` is typed as a
Hugging Face token rather than a generic assignment; later rules never re-redact a
placeholder.
"""

from __future__ import annotations

from typing import Any

RULES: list[dict[str, Any]] = [
    {
        "type": "private-key",
        # PEM blocks are handled by the line state machine in redact.py; this catches a key
        # that sits on one line (JSON-escaped "\n", e.g. a GCP service-account file).
        # RE2 runs the unbounded body in linear time.
        "pattern": r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[A-Za-z0-9+/=\\ ]*"
        r"(?:-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----)?",
        "group": 0,
        "hints": ["private key"],
        "positive": [
            '"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n'
            '-----END PRIVATE KEY-----\\n"',
            "-----BEGIN OPENSSH PRIVATE KEY-----",
        ],
        "negative": ["loading public key from /etc/ssl/cert.pem", "-----BEGIN CERTIFICATE-----"],
    },
    {
        "type": "gcp-service-account-key",
        "pattern": r"\"private_key_id\"\s{0,4}:\s{0,4}\"([0-9a-f]{40})\"",
        "group": 1,
        "hints": ["private_key_id"],
        "positive": ['{"type": "service_account", "private_key_id": "3f2a9c0d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39"}'],
        "negative": ['"private_key_id": ""'],
    },
    {
        "type": "aws-access-key",
        "pattern": r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}",
        "group": 0,
        "guard": "entropy",
        "hints": ["a3t", "akia", "asia", "abia", "acca"],
        "positive": ["aws_access_key_id = AKIAZ7Q4R2VXYLM3NP5K", "key=ASIAY34FZKBOKMUTVV7AAKIAZ7Q4R2VXYLM3NP5K"],
        "negative": ["AKIAXXXXXXXXXXXXXXXX placeholder", "ASIAN_LANGUAGES_DATASET loaded"],
    },
    {
        "type": "aws-secret-key",
        "pattern": r"(?i)(?:aws_?secret_?access_?key|aws_?secret_?key|secret_?access_?key)[\"']?\s{0,4}[:=]\s{0,4}"
        r"[\"']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+]|$)",
        "group": 1,
        "hints": ["secret"],
        "positive": ["AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"],
        "negative": ["aws_secret_access_key is not set; falling back to the instance role"],
    },
    {
        "type": "github-token",
        "pattern": r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}",
        "group": 0,
        "hints": ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
        "positive": ["git clone https://ghp_R8e4Xf2LqP9mZ7wN3bV6cT1yK5hJ0aD4sG2u@github.com/org/repo"],
        "negative": ["ghp_short is not a token"],
    },
    {
        "type": "github-fine-grained-token",
        "pattern": r"\bgithub_pat_[A-Za-z0-9_]{60,255}",
        "group": 0,
        "hints": ["github_pat_"],
        "positive": ["token: github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV"],
        "negative": ["set github_pat_ in the environment"],
    },
    {
        "type": "gitlab-token",
        "pattern": r"\b(?:glpat|gldt|glrt|glptt|glft|glsoat|gloas|glagent|glimt|glffct|glcbt)-[A-Za-z0-9_.-]{20,255}",
        "group": 0,
        "hints": ["gl"],
        "positive": ["CI_JOB_TOKEN glpat-xR4kP9mZ2qW7nB5vC8tY"],
        "negative": ["glpat-short"],
    },
    {
        "type": "huggingface-token",
        "pattern": r"\b(?:hf_|api_org_)[A-Za-z0-9]{34}",
        "group": 0,
        "hints": ["hf_", "api_org_"],
        "positive": ["huggingface-cli login --token hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567"],
        "negative": ["hf_hub_download(repo_id='gpt2', filename='config.json')"],
    },
    {
        "type": "openai-key",
        "pattern": r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,100}T3BlbkFJ[A-Za-z0-9_-]{20,100}",
        "group": 0,
        "hints": ["t3blbkfj"],
        "positive": ["OPENAI_API_KEY=sk-proj-abcdEFGH1234ijklMNOP5678T3BlbkFJqrstUVWX9012yzabCDEF"],
        "negative": ["sk-learn 1.5.0"],
    },
    {
        "type": "anthropic-key",
        "pattern": r"\bsk-ant-[a-z]{3,6}\d{2}-[A-Za-z0-9_-]{32,255}",
        "group": 0,
        "hints": ["sk-ant-"],
        "positive": ["x-api-key: sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-AbCd"],
        "negative": ["sk-ant-api03-short"],
    },
    {
        "type": "api-key",
        # Other `sk-` keys (DeepSeek, legacy OpenAI): the entropy guard spares sk-learn-style names.
        "pattern": r"\bsk-[A-Za-z0-9_-]{32,255}",
        "group": 0,
        "guard": "token",
        "hints": ["sk-"],
        "positive": ["api_base=https://api.deepseek.com key sk-9f8e7d6c5b4a39281706f5e4d3c2b1a0"],
        "negative": ["pip install sk-learn-intelex-extension-for-everything-else"],
    },
    {
        "type": "wandb-key",
        "pattern": r"\bwandb_v1_[A-Za-z0-9_]{60,120}",
        "group": 0,
        "hints": ["wandb_v1_"],
        "positive": ["WANDB_API_KEY=wandb_v1_" + "a1B2c3D4e5F6g7H8i9J0" * 4],
        "negative": ["wandb_v1_ prefix"],
    },
    {
        "type": "wandb-key",
        # Legacy 40-hex keys only next to a W&B word (`.netrc` lines, `wandb login <key>`).
        "pattern": r"(?i)(?:wandb|api\.wandb\.ai)[^\n]{0,40}?\b(?:local-)?([0-9a-f]{40})\b",
        "group": 1,
        "hints": ["wandb"],
        "positive": [
            "machine api.wandb.ai login user password 0123456789abcdef0123456789abcdef01234567",
            "wandb login 89ab4c2d0e1f23456789abcdef0123456789abcd",
        ],
        "negative": ["wandb: Syncing run swift-dawn-12", "commit 0123456789abcdef0123456789abcdef01234567"],
    },
    {
        "type": "slack-token",
        "pattern": r"\bxox[abeoprs]-[A-Za-z0-9-]{10,255}",
        "group": 0,
        "hints": ["xox"],
        "positive": ["SLACK_BOT_TOKEN xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"],
        "negative": ["xoxo-thanks"],
    },
    {
        "type": "slack-webhook",
        "pattern": r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+-]{20,255}",
        "group": 0,
        "hints": ["hooks.slack.com"],
        "positive": ["notify: https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"],
        "negative": ["see https://api.slack.com/messaging/webhooks"],
    },
    {
        "type": "stripe-key",
        "pattern": r"\b(?:sk|rk)_(?:test|live|prod)_[A-Za-z0-9]{10,99}",
        "group": 0,
        "hints": ["_test_", "_live_", "_prod_"],
        "positive": ["stripe.api_key = 'sk_live_4eC39HqLyjWDarjtT1zdp7dc'"],
        "negative": ["run_test_suite passed"],
    },
    {
        "type": "jwt",
        "pattern": r"\beyJ[A-Za-z0-9_-]{8,1000}\.eyJ[A-Za-z0-9_-]{8,1000}\.[A-Za-z0-9_-]{0,1000}",
        "group": 0,
        "hints": ["eyj"],
        "positive": [
            "cookie=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
        ],
        "negative": ['eyJ is base64 for {"'],
    },
    {
        "type": "google-api-key",
        "pattern": r"\bAIza[0-9A-Za-z_-]{35}",
        "group": 0,
        "hints": ["aiza"],
        "positive": ["GOOGLE_API_KEY: AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"],
        "negative": ["AIzaShort"],
    },
    {
        "type": "npm-token",
        "pattern": r"\bnpm_[A-Za-z0-9]{36}",
        "group": 0,
        "hints": ["npm_"],
        "positive": ["//registry.npmjs.org/:_authToken=npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"],
        "negative": ["npm_config_cache=/tmp/npm"],
    },
    {
        "type": "pypi-token",
        "pattern": r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,1000}",
        "group": 0,
        "hints": ["pypi-ageichlwas5vcmc"],
        "positive": ["TWINE_PASSWORD=pypi-AgEIcHlwaS5vcmc" + "CJDk2YjRmNmE1LTcyZDAtNDQ3Ni1hM2Y0LWE1" * 2],
        "negative": ["uploading to pypi-test"],
    },
    {
        "type": "groq-key",
        "pattern": r"\bgsk_[A-Za-z0-9]{52}",
        "group": 0,
        "hints": ["gsk_"],
        "positive": ["GROQ_API_KEY gsk_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3" * 2],
        "negative": ["gsk_short"],
    },
    {
        "type": "replicate-token",
        "pattern": r"\br8_[A-Za-z0-9_-]{37}",
        "group": 0,
        "hints": ["r8_"],
        "positive": ["REPLICATE r8_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8s"],
        "negative": ["r8_data shard"],
    },
    {
        "type": "databricks-token",
        "pattern": r"\bdapi[a-f0-9]{32}(?:-\d)?",
        "group": 0,
        "hints": ["dapi"],
        "positive": ["DATABRICKS_TOKEN dapi0123456789abcdef0123456789abcdef"],
        "negative": ["dapi rate"],
    },
    {
        "type": "docker-token",
        # Docker Hub access tokens: `dckr_pat_` (personal) and `dckr_oat_` (organization), Docker
        # docs "Personal access tokens" / "Organization access tokens"; 27 to 32 characters
        # follow (gitleaks, nosey-parker `np.docker`). Bounds widened so no tail survives.
        "pattern": r"\bdckr_(?:pat|oat)_[A-Za-z0-9_-]{20,64}",
        "group": 0,
        "hints": ["dckr_"],
        "positive": [
            "docker login -u bot -p dckr_pat_2YotnFZFEjr1zCsicMWpAA9ZxQ registry-1.docker.io",
            "DOCKERHUB_TOKEN=dckr_oat_7Hn2kQ9xRb4Lm8Vc1Tz6Wp3Ys5Dg0Fj2",
        ],
        "negative": ["see the dckr_pat_ prefix in the docs"],
    },
    {
        "type": "shopify-token",
        # Shopify's prefixed secrets: shpat_ (Admin API access token), shpca_ (custom app),
        # shppa_ (private app), shpss_ (app shared secret), shpua_; 32 hex digits each
        # (shopify.dev changelog "new access token format"; gitleaks shopify-*).
        "pattern": r"\bshp(?:at|ca|pa|ss|ua)_[a-fA-F0-9]{32}",
        "group": 0,
        "hints": ["shp"],
        "positive": [
            "X-Shopify-Access-Token: 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",
            "SHOPIFY_API_SECRET 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",
        ],
        "negative": ["shpat_ tokens rotate", "loading shpss_config.json"],
    },
    {
        "type": "kaggle-key",
        # Kaggle API keys are 32 hex digits, in KAGGLE_KEY and kaggle.json (Kaggle/kaggle-api
        # README, "API credentials").
        "pattern": r"(?i)kaggle_?key[\"']?\s{0,4}[:=]\s{0,4}[\"']?([0-9a-f]{32})\b",
        "group": 1,
        "hints": ["kaggle"],
        "positive": ["KAGGLE_KEY=99c25f6172e69f41cecad35ca6af6563", "kaggle_key: '99c25f6172e69f41cecad35ca6af6563'"],
        "negative": ["KAGGLE_KEY is not set: read ~/.kaggle/kaggle.json", "kaggle datasets download -d owner/set"],
    },
    {
        "type": "kaggle-key",
        # kaggle.json as printed: {"username":"...","key":"<32 hex>"}.
        "pattern": r"\"username\"\s{0,4}:\s{0,4}\"[^\"]{0,100}\"\s{0,4},"
        r"\s{0,4}\"key\"\s{0,4}:\s{0,4}\"([0-9a-fA-F]{32})\"",
        "group": 1,
        "hints": ['"key"'],
        "positive": ['{"username":"sonia","key":"99c25f6172e69f41cecad35ca6af6563"}'],
        "negative": ['{"username":"sonia","key":"<your key>"}', '{"username": "a", "key": "value"}'],
    },
    {
        "type": "kaggle-key",
        # The newer Kaggle API tokens (kaggle 1.8, KAGGLE_API_TOKEN) start with KGAT_.
        "pattern": r"\bKGAT_[A-Za-z0-9]{32,128}",
        "group": 0,
        "hints": ["kgat_"],
        "positive": [
            "export KAGGLE_API_TOKEN=KGAT_c70783487531b81b83b96755edfcace6",
            "kaggle api token KGAT_c70783487531b81b83b96755edfcace6 expired",
        ],
        "negative": ["KGAT_ tokens replace kaggle.json"],
    },
    {
        "type": "sentry-token",
        # Sentry auth tokens: sntryu_ + 64 hex (user), sntrys_ + base64 payload + _ + secret
        # (organization); Sentry docs "Auth Tokens", gitleaks sentry-*-token.
        "pattern": r"\b(?:sntryu_[a-f0-9]{64}|sntrys_[A-Za-z0-9+/=_]{40,1000})",
        "group": 0,
        "hints": ["sntry"],
        "positive": [
            "SENTRY_AUTH_TOKEN sntryu_" + "9f8e7d6c5b4a3928" * 4,
            "sentry-cli --auth-token sntrys_eyJpYXQiOjE2ODQ4ODEyMzQuNSwidXJsIjoiaHR0cHM6Ly9zZW50cnkuaW8ifQ_Ab12",
        ],
        "negative": ["sntryu_ tokens belong to a user"],
    },
    {
        "type": "digitalocean-token",
        # dop_v1_ (personal), doo_v1_ (OAuth), dor_v1_ (refresh) + 64 hex: DigitalOcean docs
        # "How to create a personal access token", gitleaks digitalocean-*.
        "pattern": r"\bdo[opr]_v1_[a-f0-9]{64}",
        "group": 0,
        "hints": ["_v1_"],
        "positive": ["DIGITALOCEAN_TOKEN dop_v1_" + "0123456789abcdef" * 4],
        "negative": ["dop_v1_ is the prefix"],
    },
    {
        "type": "vault-token",
        # HashiCorp Vault 1.10+ tokens: hvs. (service), hvb. (batch), hvr. (recovery);
        # Vault docs "Token prefixes".
        "pattern": r"\bhv[sbr]\.[A-Za-z0-9_-]{24,400}",
        "group": 0,
        "hints": ["hvs.", "hvb.", "hvr."],
        "positive": ["VAULT_TOKEN=hvs.CAESIJlUvWmtq7eLVXbwQfS8M3u9ykyZ6dF1nH2oGk4Rb5aT"],
        "negative": ["hvs.json loaded"],
    },
    {
        "type": "grafana-token",
        # Grafana Cloud access policy tokens (glc_ + base64) and service account tokens
        # (glsa_ + 32 + _ + 8 hex): Grafana docs, gitleaks grafana-*.
        "pattern": r"\b(?:glc_[A-Za-z0-9+/]{32,400}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})",
        "group": 0,
        "hints": ["glc_", "glsa_"],
        "positive": [
            "GRAFANA_TOKEN glsa_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6" + "_0a1b2c3d",
            "grafana cloud key glc_eyJvIjoiMTIzNCIsIm4iOiJtbC1ydW5zIiwiayI6IkFiQ2QifQ==",
        ],
        "negative": ["glc_ prefix", "glsa_short_1234"],
    },
    {
        "type": "google-oauth-token",
        # Google OAuth 2.0 access tokens start with ya29. (Google Identity docs; gitleaks gcp).
        "pattern": r"\bya29\.[0-9A-Za-z_-]{20,1000}",
        "group": 0,
        "hints": ["ya29."],
        "positive": ["gcloud token ya29.a0AfH6SMBx3kQ9Lm2Vc7Tz1Wp8Ys5Dg0Fj4Hn6Rb"],
        "negative": ["ya29.short"],
    },
    {
        "type": "postman-key",
        # Postman API keys: PMAK- + 24 hex + - + 34 hex (Postman docs; gitleaks postman-api-token).
        "pattern": r"\bPMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}",
        "group": 0,
        "hints": ["pmak-"],
        "positive": ["x-api-key: PMAK-0123456789abcdef01234567-0123456789abcdef0123456789abcdef01"],
        "negative": ["PMAK-short"],
    },
    {
        "type": "api-key",
        # Vendor prefixes of other AI and tooling APIs: Perplexity pplx- + 48 (Perplexity docs),
        # Linear lin_api_ + 40 (Linear docs), Notion ntn_ + 11 digits + 35 (Notion docs); gitleaks.
        "pattern": r"\b(?:pplx-[A-Za-z0-9]{48}|lin_api_[A-Za-z0-9]{40}|ntn_[0-9]{11}[A-Za-z0-9]{35})",
        "group": 0,
        "hints": ["pplx-", "lin_api_", "ntn_"],
        "positive": [
            "PPLX_API_KEY pplx-" + "a1B2c3D4e5F6g7H8" * 3,
            "linear client lin_api_" + "a1B2c3D4e5F6g7H8i9J0" * 2,
            "NOTION ntn_12345678901" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R",
        ],
        "negative": ["pplx-7b-online model", "lin_api_ prefix", "ntn_loss=0.3"],
    },
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
        "pattern": r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s:/?#@]{1,256}:([^\s@/]{1,256})@",
        "group": 1,
        "hints": ["://"],
        "positive": [
            "sqlalchemy.exc.OperationalError: postgresql://mlops:Sup3rS3cret!@db.example.com:5432/runs",
            "REDIS_URL=redis://default:hunter22@10.0.3.4:6379/0",
        ],
        "negative": ["Downloading https://huggingface.co/gpt2/resolve/main/config.json"],
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
        r"|(?:hf|wandb|api|auth|access|refresh|session|github|gh|slack|bot|bearer|secret|oauth|personal)[_-]?token)"
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
        r"|(?:hf|wandb|api|auth|access|refresh|session|github|gh|slack|bot|bearer|secret|oauth|personal)[_-]?token)"
        r"[a-z0-9_.-]{0,20}[\"']?[ \t]{0,4}[:=][ \t]{0,4}[\"']?([^\s\"',;]{4,256})",
        "group": 1,
        "guard": "value",
        "hints": ["pass", "pwd", "secret", "key", "credential", "token"],
        "positive": [
            "mysql --user=root --password=hunter22",
            "auth_token: 'c2VjcmV0LXZhbHVl'",
            '{"client_secret": "f3a9-2b7c-d1e0"}',
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

# Environment names that hold secrets (HF_TOKEN yes; TOKENIZERS_PARALLELISM, MAX_TOKENS no).
SECRET_NAME_PARTS = frozenset({"SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS", "APIKEY"})
SECRET_NAME_PAIRS = (
    "API_KEY",
    "ACCESS_KEY",
    "PRIVATE_KEY",
    "SECRET_KEY",
    "AUTH_KEY",
    "KAGGLE_KEY",
    "_PWD",
)  # bare PWD = cwd

# Last labels of `name@file.ext` strings that are files, not mail domains.
FILE_SUFFIXES = frozenset(
    {"pt", "pth", "bin", "ckpt", "json", "py", "yaml", "yml", "txt", "log", "h5", "onnx", "gguf", "safetensors"}
    | {"npz", "npy", "tar", "gz", "zip", "csv", "parquet", "arrow", "jpg", "png", "so", "whl", "pkl", "cu", "cpp", "h"}
)

# Values of `password=` style assignments that are not secrets.
NOT_SECRET_VALUES = frozenset(
    {"none", "null", "nil", "true", "false", "undefined", "required", "optional", "empty", "unset", "default", "str"}
)
