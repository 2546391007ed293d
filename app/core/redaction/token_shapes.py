"""Redaction rules for secrets recognised by their own shape: keys and tokens with a vendor
prefix or a fixed layout (private keys, cloud keys, GitHub, Hugging Face, OpenAI, ...).

The fields of an entry are described in app/core/redaction/rules.py, which puts these rules
first: a specific token shape must win over a generic assignment.
"""

from __future__ import annotations

from typing import Any

TOKEN_SHAPES: list[dict[str, Any]] = [
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
        # The whole run of key characters: a key glued to another (or to more capitals) must not
        # leave its tail in the clear after the first twenty are replaced.
        "pattern": r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16,200}",
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
]
