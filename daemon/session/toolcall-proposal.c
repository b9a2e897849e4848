/*
 * What a command changed in protected paths, proposed again: a run's
 * check (lockaudit.h) puts back what the command changed there, and each
 * new or changed file inside the allowed root becomes a write_file of the
 * command's bytes that always asks a human (TOOLCALL_ASK_ALWAYS), pinned
 * to the file as put back. Its outcome goes to the session's history like
 * any call's.
 */
#include "gbr-config.h"

#include <string.h>

#include "log.h"
#include "sandbox.h"
#include "session.h"
#include "session-env.h"
#include "toolcall-int.h"

/* A proposal's call has ended: its outcome is in the session's history. */
static void
tc_proposal_done(void *arg, const struct toolcall_outcome *o)
{
}

/*
 * A run's check (lockaudit.h) put back what commands changed in protected
 * paths: each new or changed file inside the allowed root is proposed to
 * a human as a write_file of the command's bytes, which always asks and
 * is pinned to the file as put back. Returns a new copy of result without
 * those bytes, each such change marked "proposed": true.
 */
json_t *
tc_propose_changes(struct toolcall *c, json_t *result)
{
	struct toolcall_opts	 o;
	struct gbr_error	 err;
	struct session		*s;
	struct env		*env;
	struct sandbox		*sb;
	json_t			*out = json_deep_copy(result), *ch, *args;
	const char		*path, *root;
	char			*cause;
	size_t			 i, n;

	if ((s = session_find(c->session)) == NULL ||
	    session_env_and_sandbox(s, &env, &sb, &cause) != 0) {
		if (s != NULL)
			free(cause);
		s = NULL;
	}
	root = s != NULL ? sandbox_root_path(sb, 0) : NULL;
	n = root != NULL ? strlen(root) : 0;
	json_array_foreach(json_object_get(out, "protected_changes"), i, ch) {
		path = json_string_value(json_object_get(ch, "path"));
		if (root == NULL || path == NULL ||
		    !json_is_string(json_object_get(ch, "proposed")) ||
		    strncmp(path, root, n) != 0 || path[n] != '/') {
			json_object_del(ch, "proposed");
			continue;
		}
		args = json_pack("{s:s, s:O}", "path", path + n + 1, "content",
		    json_object_get(ch, "proposed"));
		memset(&o, 0, sizeof o);
		o.flags = TOOLCALL_ASK_ALWAYS;
		o.turn = c->turn;
		if (toolcall_start(c->session, "write_file", args, &o,
		    tc_proposal_done, NULL, NULL, &err) == 0)
			json_object_set_new(ch, "proposed", json_true());
		else {
			log_warn("session %s: the change to %s cannot be "
			    "proposed: %s", c->session, path, err.message);
			gbr_error_clear(&err);
			json_object_del(ch, "proposed");
		}
		json_decref(args);
	}
	return out;
}
