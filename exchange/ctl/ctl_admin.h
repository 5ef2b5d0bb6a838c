/*
 * ctl_admin.h — ramexctl's administration commands: teams, accounts,
 * nodes (by id or name; create, pause and resume its trading), node keys
 * and bearer tokens. A new secret is shown once, as the server answers
 * it. Each returns an exit code (ctl_http.h).
 */
#ifndef RAMEX_CTL_ADMIN_H
#define RAMEX_CTL_ADMIN_H

#include "exchange/ctl/ctl_args.h"

int ctl_admin_accounts_create(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_admin_accounts_list(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_admin_keys_create(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_admin_keys_revoke(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_admin_nodes_create(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_admin_nodes_list(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_admin_nodes_pause(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_admin_nodes_resume(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_admin_teams_create(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_admin_teams_list(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_admin_tokens_create(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_admin_tokens_list(struct ctl_ctx *x, struct ctl_opts *o);
int ctl_admin_tokens_revoke(struct ctl_ctx *x, struct ctl_opts *o);

#endif
