/*
 * The secret stores of a home (see secrets.h).
 */
#include "gbr-config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "pathgate.h"
#include "paths.h"
#include "secrets.h"
#include "xmalloc.h"

static const char *const secrets_list[] = {
	".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".kube",
	".docker", ".netrc", ".git-credentials", ".config/git/credentials",
	".config/gh", ".config/hub", ".pypirc", ".npmrc", ".yarnrc",
	".cargo/credentials", ".cargo/credentials.toml", ".gem/credentials",
	".m2/settings.xml", ".gradle/gradle.properties", ".password-store",
	".local/share/keyrings", ".local/share/kwalletd", ".pki",
	".mozilla", ".config/google-chrome", ".config/chromium",
	".config/BraveSoftware", ".bash_history", ".zsh_history",
	".python_history", ".node_repl_history", ".psql_history",
	".mysql_history", ".sqlite_history", ".lesshst", ".viminfo",
	".local/share/fish/fish_history", ".config/gbr", ".local/state/gbr",
	/* gbr's own config (and keys) and state where Windows keeps them. */
	"AppData/Roaming/gbr", "AppData/Local/gbr",
};

/* The list (see secrets.h). */
const char *const *
secrets_stores(size_t *n)
{
	*n = sizeof secrets_list / sizeof secrets_list[0];
	return secrets_list;
}

/* The home, real (see secrets.h). */
char *
secrets_home(void)
{
	char	*h = paths_home_dir(), p[PATH_MAX];

	if (h == NULL || realpath(h, p) == NULL) {
		free(h);
		return NULL;
	}
	free(h);
	return xstrdup(p);
}

/*
 * True if a is b or lies beneath it (see secrets.h): whole components,
 * compared as the system's file names compare (without case on Windows,
 * where .SSH is .ssh); a root ("/", "C:/") holds every path on it.
 */
int
secrets_beneath(const char *a, const char *b)
{
	size_t	 n = strlen(b);
	char	*head, *top;
	int	 r;

	if (n > 0 && b[n - 1] == '/')
		n--;	/* "C:/" is "C:" and what follows; "/" is "" */
	if (strlen(a) < n || (a[n] != '/' && a[n] != '\0'))
		return 0;
	head = xstrndup(a, n);
	top = xstrndup(b, n);
	r = pathgate_equal(head, top, PATHGATE_HOST);
	free(head);
	free(top);
	return r;
}

/* Why a folder may not be read by the agent (see secrets.h). */
const char *
secrets_refuse(const char *path, const char *home)
{
	const char	*why = NULL;
	char		*h = NULL, *s;
	size_t		 i;

	if (home == NULL && (home = h = secrets_home()) == NULL)
		return NULL;
	if (secrets_beneath(home, path))
		why = "it is the home or holds it";
	for (i = 0; why == NULL && i < sizeof secrets_list /
	    sizeof secrets_list[0]; i++) {
		s = xasprintf("%s/%s", home, secrets_list[i]);
		if (secrets_beneath(path, s) || secrets_beneath(s, path))
			why = "it holds or is inside a secret store";
		free(s);
	}
	free(h);
	return why;
}
