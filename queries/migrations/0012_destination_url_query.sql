-- A destination URL's query string often carries a credential
-- (?api_key=...), so it is sealed like header values: url keeps the URL
-- with each query value masked (what responses show), and
-- sealed_url_query the real query, opened only to make a push call.
-- Destinations saved before this migration keep their query in url until
-- they are saved again.
alter table destinations add column sealed_url_query bytea;
