//! The HTTP API by endpoint family (Consul's `agent/*_endpoint.go`), with the helpers they
//! share beside them: the request context, body decoding, `?filter=`, ACL enforcement and the
//! catalog's JSON forms. The families answer; the route table in `http` picks the family.

pub(crate) mod access;
pub(crate) mod acl;
pub(crate) mod acl_templates;
pub(crate) mod agent;
pub(crate) mod agent_misc;
pub(crate) mod agent_service;
pub(crate) mod catalog;
pub(crate) mod catalog_json;
pub(crate) mod config_entries;
pub(crate) mod connect;
pub(crate) mod ctx;
pub(crate) mod decode;
pub(crate) mod event;
pub(crate) mod filter;
pub(crate) mod health;
pub(crate) mod kv;
pub(crate) mod operator;
pub(crate) mod prepared_query;
pub(crate) mod session;
pub(crate) mod txn;
pub(crate) mod txn_catalog;
pub(crate) mod unimplemented;
