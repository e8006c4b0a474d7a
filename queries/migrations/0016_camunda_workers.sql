-- Workers of the Camunda 7 facade (DESIGN §14) poll like the pull
-- protocol's and are listed in the catalog too, under a protocol of their
-- own so that an operator knows which client to look for. A worker id is
-- one poller row whichever of the two it polls with (its last fetch's).
alter table workers drop constraint workers_protocol_check;
alter table workers add constraint workers_protocol_check check (protocol in ('stream', 'long_poll', 'camunda'));
drop index workers_poller;
create unique index workers_poller on workers (consumer_id, worker_id) where protocol <> 'stream';
