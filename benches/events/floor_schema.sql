drop table if exists ik, ord, att, ev;
create table ik (merchant_id bigint, key text, fp bytea, status text, resp_code int, resp_body jsonb, locked_at timestamptz default now(), expires_at timestamptz, primary key (merchant_id, key));
create table ord (id uuid primary key, merchant_id bigint, amount bigint, currency text, status text, created_at timestamptz default now());
create table att (id uuid primary key, order_id uuid references ord(id), status text, pkey text unique, created_at timestamptz default now(), updated_at timestamptz);
create unique index one_active on att(order_id) where status in ('created','pending');
create table ev (id bigserial primary key, att_id uuid, from_s text, to_s text, at timestamptz default now());
drop table if exists calls, wh;
create table calls (id bigserial primary key, att_id uuid, op text, http_status int, outcome text, at timestamptz default now());
create table wh (provider text, event_id text, att_id uuid, kind text, payload jsonb, outcome text, at timestamptz default now(), primary key (provider, event_id));
-- The outbox (added for payorch's #30): an event per change, one delivery row per subscribed
-- endpoint, as payorch's `events` and `event_deliveries`.
drop table if exists obx_delivery, obx_event;
create table obx_event (id uuid primary key, seq bigserial, merchant_id bigint, type text, resource_id uuid, order_id uuid, snapshot jsonb, request jsonb, created_at timestamptz default now());
create unique index obx_event_once on obx_event (merchant_id, resource_id, type);
create table obx_delivery (event_id uuid references obx_event(id) on delete cascade, endpoint_id uuid, state text default 'pending', attempts int default 0, next_attempt_at timestamptz default now(), primary key (event_id, endpoint_id));
create index obx_delivery_due on obx_delivery (next_attempt_at) where state = 'pending';
