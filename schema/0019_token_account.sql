-- Only an operator token acts for an account (its operator account). POST
-- /v1/tokens stored an account_id for the other roles too, which nothing
-- scoped by: a finance token made "for" an account read every account's
-- billing while whoami named that one account. ramexd refuses such a token
-- now (422); the ones stored before lose the account they never had.
UPDATE api_tokens SET account_id = NULL
 WHERE role <> 'operator' AND account_id IS NOT NULL;
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_account_is_an_operators
    CHECK (role = 'operator' OR account_id IS NULL);
