"""More redaction rules for secrets known by their shape: vendor tokens from the public secret-scanning rule
sets (gitleaks, trufflehog), beyond the cloud and ML keys of app/core/redaction/token_shapes.py (issue #38).

The fields of an entry are described in app/core/redaction/rules.py, which runs these right after the
first token shapes. Each has a prefix or a layout no ordinary log text has; where one is short or made
of common letters a guard (`token`: digits and letters mixed, high entropy) spares words.
"""

from __future__ import annotations

from typing import Any

VENDOR_SHAPES: list[dict[str, Any]] = [
    {
        # SendGrid API keys: SG. + 22 + . + 43 (SendGrid docs "API keys"; gitleaks sendgrid-api-token).
        "type": "sendgrid-key",
        "pattern": r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}",
        "group": 0,
        "hints": ["sg."],
        "positive": [
            "SENDGRID_API_KEY=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",
            "sendgrid.SendGridAPIClient('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')",
        ],
        "negative": ["SG.1 rev 2 of the board", "sg.set_title('loss')"],
    },
    {
        # Twilio API keys: SK + 32 hex (Twilio docs "API keys"; gitleaks twilio-api-key).
        "type": "twilio-key",
        "pattern": r"\bSK[0-9a-fA-F]{32}",
        "group": 0,
        "guard": "token",
        "hints": ["sk"],
        "positive": [
            "twilio api:keys SK5bedf985d85b277904d7b20b17c4e251 created",
            "TWILIO_API_KEY: SK5bedf985d85b277904d7b20b17c4e251",
        ],
        "negative": ["SKIPPED 32 tests", "SKaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],
    },
    {
        # Mailgun private API keys: key- + 32 hex (Mailgun docs; gitleaks mailgun-private-api-token).
        "type": "mailgun-key",
        "pattern": r"\bkey-[0-9a-f]{32}",
        "group": 0,
        "guard": "token",
        "hints": ["key-"],
        "positive": ["requests.post(url, auth=('api', 'key-e04c4861a802e6984d5097c132ec90d8'))"],
        "negative": ["key-value store ready", "key-00000000000000000000000000000000"],
    },
    {
        # Telegram bot tokens: bot id : A + 34 (Telegram Bot API docs; gitleaks telegram-bot-api-token).
        "type": "telegram-bot-token",
        "pattern": r"(?:\bbot|\b)([0-9]{5,16}:A[A-Za-z0-9_-]{34})",
        "group": 1,
        "hints": [":a"],
        "positive": [
            "https://api.telegram.org/bot123456789:AAA5OECulnzKTgLTuNr7kbQKX6pnNte9l8L/sendMessage",
            "TELEGRAM_TOKEN 123456789:AAA5OECulnzKTgLTuNr7kbQKX6pnNte9l8L",
        ],
        "negative": ["12:34:56 step 10", "epoch 123456:All done"],
    },
    {
        # Discord webhook URLs: the token after the webhook id (Discord developer docs "Webhook";
        # gitleaks discord-webhook).
        "type": "discord-webhook",
        "pattern": r"https?://(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api/webhooks/[0-9]{17,20}/([A-Za-z0-9_-]{60,68})",
        "group": 1,
        "hints": ["discord"],
        "positive": [
            "notify https://discord.com/api/webhooks/123456789012345678/pUg26hZ8DzCTIntHRnfhXPGVJ3p1345ExUr6HGJD0ojS_NIuMaeaFQHps-fLei1E1hwv"
        ],
        "negative": ["see https://discord.com/developers/docs/resources/webhook"],
    },
    {
        # Atlassian API tokens: ATATT3 + 186 (Atlassian docs; gitleaks atlassian-api-token).
        "type": "atlassian-token",
        "pattern": r"\bATATT3[A-Za-z0-9_=-]{186}",
        "group": 0,
        "hints": ["atatt3"],
        "positive": [
            "JIRA_API_TOKEN=ATATT3kx6ZP18AMnWhksX2BdOG9PICTGc3DGSqjar9Fa1YLlNPHbrq9WWHdauX0feWPByjNChXsmmKlLsGpzLPSYfZbe2rvy94kk8QsI9qt6G6bvZ9Z9rYW0ZuXpge8bvijdu7OxbiM4RjRnZLWiI65czGqbaJ713cD2q1B2lEX2cpF1sCk8hB9yXOjkQYvZ"
        ],
        "negative": ["ATATT3 is the prefix"],
    },
    {
        # Microsoft Entra ID (Azure AD) client secrets: 3 + digit + Q~ + 31-34 (gitleaks azure-ad-client-secret).
        "type": "azure-ad-client-secret",
        "pattern": r"(?:^|[\s'\"=:(>])([A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34})",
        "group": 1,
        "hints": ["q~"],
        "positive": [
            "AZURE_CLIENT_SECRET=abc8Q~bNIp6ccbSVakvNpNuC26E02gR0FW6AoQAQ",
            "client_secret: 'abc8Q~bNIp6ccbSVakvNpNuC26E02gR0FW6AoQAQ'",
        ],
        "negative": ["Q~ is shown in the portal"],
    },
    {
        # Doppler tokens: dp.pt. (personal), dp.st. (service), ... + 40-44 (Doppler docs "Token formats";
        # gitleaks doppler-api-token).
        "type": "doppler-token",
        "pattern": r"\bdp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}",
        "group": 0,
        "hints": ["dp."],
        "positive": ["DOPPLER_TOKEN=dp.pt.KNXeTfphGoWU8AGcHAcJvEYqCdg43i1lA8T0OxxcKvt"],
        "negative": ["dp.pt.short"],
    },
    {
        # Dynatrace API tokens: dt0c01. + 24 + . + 64 (Dynatrace docs "Access tokens"; gitleaks dynatrace-api-token).
        "type": "dynatrace-token",
        "pattern": r"\bdt0c01\.[A-Z0-9]{24}\.[A-Za-z0-9]{64}",
        "group": 0,
        "hints": ["dt0c01."],
        "positive": [
            "DT_API_TOKEN=dt0c01.V80ABSRAF4ESZVKM6ZOQX4II.mmHk62IgPhot357nFypoxYeQG32Tc08zk61cLahV7cWSZzDgwQYDxXRFlXV373C6"
        ],
        "negative": ["dt0c01.short"],
    },
    {
        # New Relic keys: NRAK- (user), NRJS- (browser), NRII- (insert) (New Relic docs "API keys";
        # gitleaks new-relic-*).
        "type": "newrelic-key",
        "pattern": r"\bNR(?:AK|JS|II)-[A-Za-z0-9]{19,32}",
        "group": 0,
        "hints": ["nrak-", "nrjs-", "nrii-"],
        "positive": ["NEW_RELIC_API_KEY=NRAK-8IZ7680LXCXN3C1HYQ95ZB1KBHC"],
        "negative": ["NRAK- keys are user keys"],
    },
    {
        # PlanetScale service tokens and passwords (PlanetScale docs; gitleaks planetscale-*).
        "type": "planetscale-token",
        "pattern": r"\bpscale_(?:tkn|pw|oauth)_[A-Za-z0-9_=.-]{32,64}",
        "group": 0,
        "hints": ["pscale_"],
        "positive": ["mysql://user:x@aws.connect.psdb.cloud/db pscale_tkn_2s1r3TSnyxDOMAYr7NOzpLGYRJct0Vm7u5HXtqkkB9J"],
        "negative": ["pscale_tkn_ prefix"],
    },
    {
        # Pulumi access tokens: pul- + 40 hex (Pulumi docs; gitleaks pulumi-api-token).
        "type": "pulumi-token",
        "pattern": r"\bpul-[a-f0-9]{40}",
        "group": 0,
        "hints": ["pul-"],
        "positive": ["PULUMI_ACCESS_TOKEN=pul-62efa687f99692ef415ca4cc9b014e3b9cefa110"],
        "negative": ["pul-up the logs"],
    },
    {
        # RubyGems API keys: rubygems_ + 48 hex (RubyGems guides; gitleaks rubygems-api-token).
        "type": "rubygems-key",
        "pattern": r"\brubygems_[a-f0-9]{48}",
        "group": 0,
        "hints": ["rubygems_"],
        "positive": ["GEM_HOST_API_KEY: rubygems_90531f147bb6addbb01ec5933c9c1b4db6e57c560236910c"],
        "negative": ["rubygems_version 3.4"],
    },
    {
        # Brevo (Sendinblue) API keys: xkeysib- + 64 hex + - + 16 (gitleaks sendinblue-api-token).
        "type": "brevo-key",
        "pattern": r"\bxkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}",
        "group": 0,
        "hints": ["xkeysib-"],
        "positive": [
            "BREVO_API_KEY=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"
        ],
        "negative": ["xkeysib- prefix"],
    },
    {
        # Square access tokens (EAAA + 60) and OAuth secrets (sq0csp-) (Square docs; gitleaks square-*).
        "type": "square-token",
        "pattern": r"\b(?:EAAA[A-Za-z0-9_-]{60}|sq0(?:atp|csp)-[A-Za-z0-9_-]{22,43})",
        "group": 0,
        "hints": ["eaaa", "sq0"],
        "positive": ["SQUARE_ACCESS_TOKEN=EAAAxjn8p7UHOlqURTs66700BRP4ryXbltw193SSQUtd3hhND5GZOUPoy0T0wN3K"],
        "negative": ["EAAA batteries"],
    },
    {
        # age encryption identities: AGE-SECRET-KEY-1 + 58 bech32 (age spec; gitleaks age-secret-key).
        "type": "age-secret-key",
        "pattern": r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
        "group": 0,
        "hints": ["age-secret-key-1"],
        "positive": ["AGE-SECRET-KEY-1GN79670HC0G75CE279QGN43P6HWVJD3Y4GAWY7HKRNY7E94X7LKJSQMGAH"],
        "negative": ["AGE-SECRET-KEY-1 lines are identities"],
    },
    {
        # Alibaba Cloud AccessKey IDs: LTAI + 20 (Alibaba Cloud docs; gitleaks alibaba-access-key-id).
        "type": "alibaba-key",
        "pattern": r"\bLTAI[A-Za-z0-9]{20}",
        "group": 0,
        "guard": "token",
        "hints": ["ltai"],
        "positive": ["ALIBABA_CLOUD_ACCESS_KEY_ID=LTAIto5xcA33MNSw34Alu7G5"],
        "negative": ["LTAIAAAAAAAAAAAAAAAAAAAA", "LTAI is the prefix"],
    },
    {
        # Terraform Cloud / HCP tokens: 14 + .atlasv1. + 60-70 (gitleaks hashicorp-tf-api-token).
        "type": "terraform-token",
        "pattern": r"\b[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}",
        "group": 0,
        "hints": [".atlasv1."],
        "positive": [
            'credentials "app.terraform.io" { token = "ACNGIPJtPQmxSq.atlasv1.'
            'mNr7Sy3hR46k3HhtMWv13c18xnGjmvoEF0WpDQC4C85bCETXIFuwFJEz0rmblC0WJTz" }'
        ],
        "negative": ["x.atlasv1.short"],
    },
    {
        # LangSmith (LangChain) API keys: lsv2_pt_ / lsv2_sk_ + 32 hex + _ + 10 hex (LangSmith docs).
        "type": "langsmith-key",
        "pattern": r"\blsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}",
        "group": 0,
        "hints": ["lsv2_"],
        "positive": ["LANGCHAIN_API_KEY=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"],
        "negative": ["lsv2_pt_ keys are personal"],
    },
    {
        # xAI API keys: xai- + 80 (xAI docs; gitleaks xai-api-key).
        "type": "xai-key",
        "pattern": r"\bxai-[A-Za-z0-9]{80}",
        "group": 0,
        "hints": ["xai-"],
        "positive": [
            "XAI_API_KEY=xai-lDnBXoXPMHrai4i61sDqvEUkaiFGa8hIOj9CUDMkGvaCTgVyZEtFqS7EOIXv6gIEM0XHDtWjqTYx43hN"
        ],
        "negative": ["xai-grok-2 model"],
    },
    {
        # Pinecone API keys: pcsk_ + id + _ + secret (Pinecone docs "Manage API keys").
        "type": "pinecone-key",
        "pattern": r"\bpcsk_[A-Za-z0-9]{4,10}_[A-Za-z0-9]{40,80}",
        "group": 0,
        "hints": ["pcsk_"],
        "positive": ["PINECONE_API_KEY=pcsk_SBBGDi_UZ3QQLut93TjdpExzUO8j91Q700Yr9UmvsTZGgb9s4KbsHV2U0KSPbPs4ZHZ"],
        "negative": ["pcsk_ keys"],
    },
    {
        # Heroku API keys: HRKU-AA + 58 (Heroku changelog 2024; gitleaks heroku-api-key-v2).
        "type": "heroku-key",
        "pattern": r"\bHRKU-AA[A-Za-z0-9_-]{58}",
        "group": 0,
        "hints": ["hrku-"],
        "positive": ["HEROKU_API_KEY=HRKU-AAFqRy4LQXAvvtVOfug632oKAHPxxjPXd3DieW32dLfUJ6eAP8jtHOFdEv6c"],
        "negative": ["HRKU-AA prefix"],
    },
    {
        # Google OAuth client secrets: GOCSPX- + 28 (Google Cloud docs; gitleaks gcp-oauth-client-secret).
        "type": "google-oauth-secret",
        "pattern": r"\bGOCSPX-[A-Za-z0-9_-]{28}",
        "group": 0,
        "hints": ["gocspx-"],
        "positive": ['{"client_secret": "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"}'],
        "negative": ["GOCSPX- prefix"],
    },
    {
        # Buildkite API access tokens: bkua_ + 40 hex (Buildkite docs).
        "type": "buildkite-token",
        "pattern": r"\bbkua_[a-f0-9]{40}",
        "group": 0,
        "hints": ["bkua_"],
        "positive": ["BUILDKITE_API_TOKEN=bkua_58dea447ace0ccd73ae3992b35722387e64f3e1f"],
        "negative": ["bkua_ prefix"],
    },
    {
        # Contentful personal access tokens: CFPAT- + 43 (Contentful docs; gitleaks contentful-delivery-api-token).
        "type": "contentful-token",
        "pattern": r"\bCFPAT-[A-Za-z0-9_-]{43}",
        "group": 0,
        "hints": ["cfpat-"],
        "positive": ["CONTENTFUL_MANAGEMENT_TOKEN=CFPAT-CkzoJYweuC5aC4ZbSyRIwhXJwAtO1ehIOx4LLYox2fY"],
        "negative": ["CFPAT- prefix"],
    },
    {
        # Figma personal access tokens: figd_ + 40 or more (Figma developer docs).
        "type": "figma-token",
        "pattern": r"\bfigd_[A-Za-z0-9_-]{40,64}",
        "group": 0,
        "hints": ["figd_"],
        "positive": ["X-Figma-Token: figd_YelqUtxrYd3aZnngfPfjOoFgvuac7Or4OPzhvHL8"],
        "negative": ["figd_ prefix"],
    },
    {
        # Airtable personal access tokens: pat + 14 + . + 64 hex (Airtable docs; gitleaks airtable-api-key).
        "type": "airtable-token",
        "pattern": r"\bpat[A-Za-z0-9]{14}\.[a-f0-9]{64}",
        "group": 0,
        "hints": ["pat"],
        "positive": [
            "AIRTABLE_TOKEN=patyeY6pIQb8OEblF.dc4f6b327fff95193d5307f5bfa118b9f4555eeb92818feec6e6d14ef3606051"
        ],
        "negative": ["pattern.match(line)"],
    },
    {
        # Slack app-level tokens: xapp- (Slack docs "Token types"; gitleaks slack-app-token).
        "type": "slack-token",
        "pattern": r"\bxapp-[0-9]-[A-Za-z0-9-]{10,255}",
        "group": 0,
        "hints": ["xapp-"],
        "positive": [
            "SLACK_APP_TOKEN=xapp-1-A0OY4J1ONWG-1234567890123-d2760d40a5c650f8cdff999b1c13b6b5c35119845915db70441975a0e2a33a93"
        ],
        "negative": ["xapp-1 is the app"],
    },
    {
        # Sourcegraph access tokens: sgp_ + 16 hex or local + _ + 40 hex (Sourcegraph docs;
        # gitleaks sourcegraph-access-token).
        "type": "sourcegraph-token",
        "pattern": r"\bsgp_(?:[a-fA-F0-9]{16}|local)_[a-fA-F0-9]{40}",
        "group": 0,
        "hints": ["sgp_"],
        "positive": ["SRC_ACCESS_TOKEN=sgp_fa1333cbfa9d5499_3a3c00f486061e937db2bb757b8952e6a3986ce2"],
        "negative": ["sgp_ prefix"],
    },
    {
        # Mailchimp API keys: 32 hex + -us + data centre (Mailchimp docs; gitleaks mailchimp-api-key).
        "type": "mailchimp-key",
        "pattern": r"\b[0-9a-f]{32}-us[0-9]{1,2}\b",
        "group": 0,
        "guard": "token",
        "hints": ["-us"],
        "positive": ["MAILCHIMP_API_KEY=ae0071492493df9d397270a9e85cf3ef-us14"],
        "negative": ["0123456789abcdef0123456789abcdef-use-this"],
    },
    {
        # Shippo API tokens: shippo_live_ / shippo_test_ + 40 hex (Shippo docs; gitleaks shippo-api-token).
        "type": "shippo-token",
        "pattern": r"\bshippo_(?:live|test)_[a-f0-9]{40}",
        "group": 0,
        "hints": ["shippo_"],
        "positive": ["SHIPPO_TOKEN=shippo_live_0265535996c2cd2809a22a2ee077cec0dd5d6fb6"],
        "negative": ["shippo_live_ prefix"],
    },
    {
        # Fly.io tokens: fo1_ + 43 (gitleaks flyio-access-token).
        "type": "flyio-token",
        "pattern": r"\bfo1_[A-Za-z0-9_-]{43}",
        "group": 0,
        "hints": ["fo1_"],
        "positive": ["FLY_API_TOKEN=fo1_HtNrRUDSzVQEyQSEBTD2HHyXVlPVty9Vl20fs5IMGAz"],
        "negative": ["fo1_ prefix"],
    },
    {
        # EasyPost API keys: EZAK (production) / EZTK (test) + 54 (EasyPost docs; gitleaks easypost-api-token).
        "type": "easypost-key",
        "pattern": r"\bEZ[AT]K[A-Za-z0-9]{54}",
        "group": 0,
        "hints": ["ezak", "eztk"],
        "positive": ["EASYPOST_API_KEY=EZAK3JjIzJwfiv8vvrjSr516N7PJgrsgNTFBzQL9g07CZdv3pa7HN7PT8i"],
        "negative": ["EZAK prefix"],
    },
    {
        # Prefect Cloud API keys: pnu_ + 36 (Prefect docs; gitleaks prefect-api-token).
        "type": "prefect-key",
        "pattern": r"\bpnu_[A-Za-z0-9]{36}",
        "group": 0,
        "hints": ["pnu_"],
        "positive": ["prefect cloud login -k pnu_lIsp0HxH79RiS7gA03EDwyxEJUkYiZd7DA9M"],
        "negative": ["pnu_ prefix"],
    },
    {
        # Clojars deploy tokens: CLOJARS_ + 60 (Clojars wiki; gitleaks clojars-api-token).
        "type": "clojars-token",
        "pattern": r"\bCLOJARS_[a-z0-9]{60}",
        "group": 0,
        "hints": ["clojars_"],
        "positive": ["CLOJARS_PASSWORD=CLOJARS_ujd1f222jr40vas0sdg75nmccc462yqpvyp69odk5u7232n82ohomt36yxae"],
        "negative": ["CLOJARS_USERNAME=bot"],
    },
    {
        # Infracost API keys: ico- + 32 (Infracost docs; gitleaks infracost-api-token).
        "type": "infracost-key",
        "pattern": r"\bico-[A-Za-z0-9]{32}",
        "group": 0,
        "guard": "token",
        "hints": ["ico-"],
        "positive": ["INFRACOST_API_KEY=ico-Bn3j3owebuz53RPrF2xkZKjDLM8BtBHL"],
        "negative": ["ico-sphere mesh"],
    },
    {
        # Duffel access tokens: duffel_test_ / duffel_live_ + 43 (Duffel docs; gitleaks duffel-api-token).
        "type": "duffel-token",
        "pattern": r"\bduffel_(?:test|live)_[A-Za-z0-9_=-]{43}",
        "group": 0,
        "hints": ["duffel_"],
        "positive": ["DUFFEL_ACCESS_TOKEN=duffel_test_GC7svE6B8Brsz93qbWbkK3AMSDnNIaXnAfushruSbqh"],
        "negative": ["duffel_live_ prefix"],
    },
]
