"""Hand-written corpus for engine/extract/secrets.py.

Every secret below is FAKE: random strings generated for this file in the providers' shapes,
card numbers with a Luhn check digit computed over random digits. None was ever issued.

POSITIVES: (name, text, [(kind, secret substring), ...]) — exactly these spans are redacted.
NEGATIVES: (name, text) — nothing is redacted.
"""

from __future__ import annotations

JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiJmYWtlLTEyMzQiLCJuYW1lIjoiVGVzdCBQZXJzb24iLCJpYXQiOjE3MDAwMDAwMDB9"
    ".WJ9QyucS19AvMp2gUAeSsUfFgUl8oPK-HJN45P_ED75"
)
RSA_BLOCK = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "PtYgjmUhBel31iEl2hpChYgCfrL1spNxnyVmihA/2O76UMFxFkM/R5Kjp1vRt+1f\n"
    "jORS/6ilI8ihN5KXSc7Tvo/hBKqFYY/kv5ZJr3J1TWDtkwtDDb+xHKas1VOqg6YY\n"
    "ZYn9ZhyiA4uoRgnatmUdjAWtGSU8po+799NksnRH9ucAUsdMlHUvTCQCyEZDz/Td\n"
    "-----END RSA PRIVATE KEY-----"
)
OPENSSH_BLOCK = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "dJ8HyS5SUkCnD8zRA9a9SkpXz9w3QlY7Zkuvqdt7s8Stqcbnr3yBdGBLEPH1qhT6\n"
    "1qtc4xatws8phP9nhFyJfm5di4PzJ59FHz5r1pY4OjE2jBMptUsGr7CmY+uCu3ZR\n"
    "-----END OPENSSH PRIVATE KEY-----"
)
PKCS8_BLOCK = (
    "-----BEGIN PRIVATE KEY-----\r\n"
    "5wIScGebcy8F5n3/YNBDRzrZSgqbjG3uhkWKFLf6xuI5aHUQPFeNBTxaQWk8JzFa\r\n"
    "lHlsZfYcMMDktXP/tKsf2rcDkdfrUnW5gcF+Ha6ili8GjHEAD6/Wj9KfzjsQGMrb\r\n"
    "-----END PRIVATE KEY-----"
)
# A paste cut off before its END line: everything from BEGIN through the base64 goes.
TRUNCATED_BLOCK = (
    "-----BEGIN EC PRIVATE KEY-----\n"
    "9h+ImB+LK777pzNk8cL6j5IXAAjlsHUqJoUD/+Ydua+5ZMs1SWOpQaPRYpzbLGVi\n"
    "lHlsZfYcMMDktXP/tKsf2rcDkdfrUnW5gcF"
)

POSITIVES: list[tuple[str, str, list[tuple[str, str]]]] = [
    # --- provider API keys
    ("openai_project_key", "export OPENAI_API_KEY=sk-proj-RHtUVQcDMpg0TMkxpdzPaEMM1ZA7V0FhHVJWDBt2",
     [("api_key", "sk-proj-RHtUVQcDMpg0TMkxpdzPaEMM1ZA7V0FhHVJWDBt2")]),
    ("openai_legacy_key_in_prose", "Here is my key sk-Rd03Q2ybv097SHzxgQA6TCvY4dhKMlRdZQ9QsTXUuSnH6av1, keep it safe.",
     [("api_key", "sk-Rd03Q2ybv097SHzxgQA6TCvY4dhKMlRdZQ9QsTXUuSnH6av1")]),
    ("anthropic_key",
     "ANTHROPIC_API_KEY=\"sk-ant-api03-cEFUV2fsjGHb6HrlEOS47WgjKCu_0xxKhg5QjWV1mKaUyvBPs0jSO2Jkf08M\"",
     [("api_key", "sk-ant-api03-cEFUV2fsjGHb6HrlEOS47WgjKCu_0xxKhg5QjWV1mKaUyvBPs0jSO2Jkf08M")]),
    ("google_key", "maps key: AIzafqY6K1Qjah4dXd3eOa1Zcc_a4CgOFfqRgz7 (restricted to our domain)",
     [("api_key", "AIzafqY6K1Qjah4dXd3eOa1Zcc_a4CgOFfqRgz7")]),
    ("stripe_secret", "stripe.api_key = 'sk_live_rUd7z14cKuuBNf0gmUBUhWRQ'",
     [("api_key", "sk_live_rUd7z14cKuuBNf0gmUBUhWRQ")]),
    ("stripe_publishable", "The publishable one is pk_live_dIAUDFbxtBetshRQNG3dhi4w.",
     [("api_key", "pk_live_dIAUDFbxtBetshRQNG3dhi4w")]),
    ("stripe_restricted", "rk_live_VnX558GkvxThvA0EhexWQ3cz was rotated yesterday",
     [("api_key", "rk_live_VnX558GkvxThvA0EhexWQ3cz")]),
    # --- tokens
    ("github_classic", "git clone https://github.com/acme/repo with ghp_tYpATIk27f4t3tGolUByxRmXBYQ0DVbpag1x",
     [("token", "ghp_tYpATIk27f4t3tGolUByxRmXBYQ0DVbpag1x")]),
    ("github_oauth", "token=gho_YKiuMw7TpHD8BHbNdZU0NYJ2gClNbc7Hrd0A",
     [("token", "gho_YKiuMw7TpHD8BHbNdZU0NYJ2gClNbc7Hrd0A")]),
    ("github_fine_grained",
     "GH_TOKEN: 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",
     [("token", "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")]),
    ("slack_bot", "SLACK_BOT_TOKEN=xoxb-77955894091-102086046928-rTtfkbSh2Cde2wioVMEuUYMj",
     [("token", "xoxb-77955894091-102086046928-rTtfkbSh2Cde2wioVMEuUYMj")]),
    ("slack_user", "my slack token is xoxp-174167885871-YF2ExFJgKLDL36awmUDt8Qvw",
     [("token", "xoxp-174167885871-YF2ExFJgKLDL36awmUDt8Qvw")]),
    ("bearer_opaque", "curl -H 'Authorization: Bearer cNRqsKz5b70CO8W7RQHy2Yp-ptzsJq_L' https://api.example.com/v1",
     [("token", "cNRqsKz5b70CO8W7RQHy2Yp-ptzsJq_L")]),
    ("basic_auth_header", "Authorization: Basic YW5hOmh1bnRlcjItaG9yc2U=",
     [("token", "YW5hOmh1bnRlcjItaG9yc2U=")]),
    # --- JWTs
    ("jwt_bare", f"The session cookie was {JWT} when it failed.", [("jwt", JWT)]),
    ("jwt_bearer", f"Authorization: Bearer {JWT}", [("jwt", JWT)]),
    # --- AWS
    ("aws_access_key_id", "aws_access_key_id = AKIA78UJK329M2WYKP4I", [("aws_key", "AKIA78UJK329M2WYKP4I")]),
    ("aws_pair",
     "[default]\naws_access_key_id = AKIALSANJ7C3C4BHOQMA\n"
     "aws_secret_access_key = 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\n",
     [("aws_key", "AKIALSANJ7C3C4BHOQMA"), ("aws_key", "Y9lMR4pAwBp3GVy1PixOqoRGrB5Vpg5C6QsyHZyt")]),
    ("aws_secret_prose", "The AWS secret key is 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, don't share it.",
     [("aws_key", "Y9lMR4pAwBp3GVy1PixOqoRGrB5Vpg5C6QsyHZyt")]),
    # --- private keys (whole block)
    ("pem_rsa", f"Server key below:\n{RSA_BLOCK}\nThat's all.", [("private_key", RSA_BLOCK)]),
    ("pem_openssh", f"{OPENSSH_BLOCK}\n", [("private_key", OPENSSH_BLOCK)]),
    ("pem_pkcs8_crlf", f"key.pem:\r\n{PKCS8_BLOCK}\r\n", [("private_key", PKCS8_BLOCK)]),
    ("pem_truncated", f"I pasted half of it:\n{TRUNCATED_BLOCK}\n\nCan you help?", [("private_key", TRUNCATED_BLOCK)]),
    # --- passwords
    ("password_colon", "Login for the router -> password: Blue-Otter-42", [("password", "Blue-Otter-42")]),
    ("password_equals", "DB_PASSWORD=n0t-4-r3al-pw", [("password", "n0t-4-r3al-pw")]),
    ("my_password_is", "my password is hunter2horse.", [("password", "hunter2horse")]),
    ("password_plain_word", "The password for the wifi is pizzaoven", [("password", "pizzaoven")]),
    ("password_json", '{"user": "ana", "password": "Tr0ub4dor&3x"}', [("password", "Tr0ub4dor&3x")]),
    ("password_quoted_space", "use password 'correct horse battery'", [("password", "correct horse battery")]),
    ("pwd_colon", "pwd: Kw9!zz-Lp", [("password", "Kw9!zz-Lp")]),
    ("passphrase", "GPG passphrase = lantern-quiet-97", [("password", "lantern-quiet-97")]),
    ("passcode", "My passcode was 7712aa", [("password", "7712aa")]),
    ("pin", "my PIN is 4821", [("password", "4821")]),
    ("db_pass_env", "MYSQL_PASS=s3cr3t_Mysql", [("password", "s3cr3t_Mysql")]),
    # --- connection strings: only the password part
    ("postgres_url", "DATABASE_URL=postgres://ana:Pg-F4ke-Pass@db.example.com:5432/app",
     [("connection_string", "Pg-F4ke-Pass")]),
    ("mongodb_srv", "mongodb+srv://svc_user:M0ngoFakePw@cluster0.abcd.mongodb.net/test?retryWrites=true",
     [("connection_string", "M0ngoFakePw")]),
    ("redis_url", "cache at redis://default:r3dis-pw-fake@10.0.0.5:6379/0", [("connection_string", "r3dis-pw-fake")]),
    ("https_userinfo", "pip install --index-url https://deploy:Xk2pLq9w@pypi.example.org/simple pkg",
     [("connection_string", "Xk2pLq9w")]),
    # --- cards (Luhn-valid)
    ("card_visa_spaces", "My card is 4358 7916 1791 8218, exp 04/27.", [("card_number", "4358 7916 1791 8218")]),
    ("card_mc_dashes", "charge 5255-4341-0380-4904 please", [("card_number", "5255-4341-0380-4904")]),
    ("card_amex", "amex 3727 276251 49941", [("card_number", "3727 276251 49941")]),
    ("card_unbroken", "cc=6011769923972974", [("card_number", "6011769923972974")]),
    ("card_13_digits", "old visa 4655685202712", [("card_number", "4655685202712")]),
    ("card_19_digits", "card number: 2435885022334552064", [("card_number", "2435885022334552064")]),
    # --- generic high-entropy values next to a keyword
    ("generic_hex_api_key", "api_key=a845d1f7c3a0579f09222a2bed27a584", [("api_key", "a845d1f7c3a0579f09222a2bed27a584")]),
    ("generic_client_secret", 'client_secret: "BSed1S3wlj46Fuq3sXRo5QhgYrZJd6F5"',
     [("generic_secret", "BSed1S3wlj46Fuq3sXRo5QhgYrZJd6F5")]),
    ("generic_token_is", "the staging token is 8LKideRuauiFtEvGjfLg1gJk7bwK", [("token", "8LKideRuauiFtEvGjfLg1gJk7bwK")]),
    ("generic_camel_access_token", "accessToken=GfGhgs870XhRQXdNWOAvlhFk&refresh=0",
     [("token", "GfGhgs870XhRQXdNWOAvlhFk")]),
    ("generic_credential_b64", "credentials: aQcT7xl2cwC6dT0ctPVnaawqrczLJWImKMG4hEbuUVDP",
     [("generic_secret", "aQcT7xl2cwC6dT0ctPVnaawqrczLJWImKMG4hEbuUVDP")]),
    ("generic_header_api_key", "X-Api-Key: 8LKideRuauiFtEvGjfLg1gJk7bwK", [("api_key", "8LKideRuauiFtEvGjfLg1gJk7bwK")]),
    # --- several in one text
    ("mixed_config",
     "user: ana\npassword: Blue-Otter-42\nSTRIPE=sk_live_rUd7z14cKuuBNf0gmUBUhWRQ\ncard 4855 2279 0321 4085",
     [("password", "Blue-Otter-42"), ("api_key", "sk_live_rUd7z14cKuuBNf0gmUBUhWRQ"),
      ("card_number", "4855 2279 0321 4085")]),
]

NEGATIVES: list[tuple[str, str]] = [
    ("prose", "We walked along the river and talked about moving to Lisbon next spring."),
    ("uuid_in_url", "See https://example.com/orders/550e8400-e29b-41d4-a716-446655440000/details for status."),
    ("uuid_bare", "request id 550e8400-e29b-41d4-a716-446655440000 failed"),
    ("git_sha", "Fixed in commit 9fceb02d0ae598e95dc970b74767f19372d61af8 on main."),
    ("git_short_sha", "merged 9fceb02 into release"),
    ("docker_digest", "image: python@sha256:3f4e5c6d7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d"),
    ("phone_intl", "Call me on +49 30 1234 5678 or +1 (415) 555-0132."),
    ("phone_digits", "my number is 004930123456789"),
    ("dates", "Born 1990-06-03, moved 03/06/2015, back on June 3rd, 2024 at 14:30."),
    ("order_number_luhn_valid", "Order #4358791617918218 shipped today."),
    ("order_number_words", "order number 5255434103804904 is delayed"),
    ("tracking_number", "Tracking number 1Z999AA10123456784"),
    ("long_words", "antidisestablishmentarianism and floccinaucinihilipilification are long words"),
    ("unix_path", "Open /home/ana/projects/memlens/engine/extract/secrets.py in the editor."),
    ("windows_path", r"Saved to C:\Users\Ana\Documents\tax_return_2023_final.pdf"),
    ("isbn", "ISBN 978-3-16-148410-0 and ISBN-13: 9780306406157"),
    ("luhn_invalid_16", "The number 4358791617918219 fails the check."),
    ("luhn_invalid_grouped", "4358 7916 1791 8219 is not a valid card"),
    ("data_uri",
     "icon key: data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kg"
     "AAAABJRU5ErkJggg=="),
    ("version_strings", "Upgraded to v2.14.3-rc.1+build.20240611 and Python 3.11.9."),
    ("forgot_password", "I forgot my password again."),
    ("password_rules", "Password must be at least 12 characters."),
    ("password_is_weak", "my password is weak, I should change it"),
    ("password_is_stored", "The password is stored in 1Password."),
    ("passwords_plural", "passwords: at least 12 characters and one digit"),
    ("password_reset", "Please use the password reset link; password_reset=true in the config."),
    ("password_masked", "password: ********"),
    ("password_placeholder", "password=${DB_PASSWORD} and password: <your password here>"),
    ("secret_prose", "The secret to good bread is time."),
    ("token_count", "token count: 4096, max tokens 8192"),
    ("key_value_prose", "key: value pairs are stored as text"),
    ("bearer_prose", "I hate being the Bearer of bad news."),
    ("basic_prose", "Basic internationalization support landed."),
    ("sklearn", "I use sk-learn (scikit-learn) for the models."),
    ("akia_word", "AKIA is the prefix AWS uses for access key ids."),
    ("pwd_command", "run pwd to see the current directory"),
    ("pwd_env", "PWD=/home/ana/projects"),
    ("url_without_password", "postgres://db.example.com:5432/app and https://ana@git.example.com/repo.git"),
    ("public_key_pem", "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----"),
    ("ssh_public_key", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHqL9xPzFakeFakePublicKeyOnlyAbC ana@laptop"),
    ("email_address", "write to ana.lima@example.com"),
    ("ipv6", "server at 2001:0db8:85a3:0000:0000:8a2e:0370:7334"),
    ("api_key_location", "The API key is stored in the keychain."),
    ("token_file_path", "token_path = /var/run/secrets/kubernetes.io/serviceaccount/token"),
    ("key_file_name", "secret key file: config/prod_secrets_2024.yaml"),
    ("auth_required", "auth: required"),
    ("monkey_keyboard", "monkey business with a keyboard shortcut Ctrl+Shift+K"),
    ("credentials_vault", "Credentials are in the team vault."),
    ("jira_and_build", "The ticket is JIRA-48213 and build 2024.06.11.3"),
    ("coordinates", "coordinates 52.520008, 13.404954"),
    ("epoch_millis", "created_at 1718092800000"),
    ("base64_no_keyword", "const logo = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk';"),
    ("jwt_prefix_only", "the string eyJhbGci is how JWT headers start"),
    ("price", "It cost 1,234,567.89 EUR in total."),
    ("identifier_after_key", "Use the key called deploy_key_2024_production"),
    ("version_after_token", "token: v2.3.1-beta.4+build.20240101"),
    ("keyword_then_code_on_next_line",
     "the key idea:\nconst logo = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAf';"),
    ("key_then_word_with_digits", "the key takeaway is internationalization2024"),
    ("token_then_timestamp", "Auth token expired at 2024-06-11T10:00:00Z yesterday"),
    ("json_schema_placeholder", '{"email": "string", "password": "string"}'),
    ("meeting_id", "Zoom meeting ID 845 2291 0073, passcode policy changed."),
]
