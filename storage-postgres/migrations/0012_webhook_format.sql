-- Webhook endpoints have a format (tidings, resend, postmark). It lives in the endpoint's
-- document like every other field; endpoints stored before formats existed are given the
-- format they have always had, so the stored documents say it rather than leaving it to
-- the reader's default.
UPDATE webhooks SET doc = jsonb_set(doc, '{format}', '"tidings"') WHERE NOT doc ? 'format';
