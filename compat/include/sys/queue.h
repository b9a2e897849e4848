/*
 * The BSD list macros gbr uses (TAILQ_*, LIST_*), for a C library that has
 * no <sys/queue.h> (mingw-w64). Only this folder's builds see this file:
 * configure puts compat/include on the include path where the system
 * header is missing. The semantics are those of the BSD manual page
 * queue(3); only the operations gbr calls are here.
 */
#ifndef GBR_COMPAT_SYS_QUEUE_H
#define GBR_COMPAT_SYS_QUEUE_H

/* A doubly linked list with a head that knows its last element. */
#define TAILQ_HEAD(name, type)						\
struct name {								\
	struct type	 *tqh_first;					\
	struct type	**tqh_last;					\
}
#define TAILQ_HEAD_INITIALIZER(head)	{ NULL, &(head).tqh_first }
#define TAILQ_ENTRY(type)						\
struct {								\
	struct type	 *tqe_next;					\
	struct type	**tqe_prev;					\
}
#define TAILQ_FIRST(head)		((head)->tqh_first)
#define TAILQ_NEXT(elm, field)		((elm)->field.tqe_next)
#define TAILQ_EMPTY(head)		(TAILQ_FIRST(head) == NULL)
/* The head and the entries have the same layout, so tqh_last leads back. */
#define TAILQ_LAST(head, headname)					\
	(*(((struct headname *)((head)->tqh_last))->tqh_last))
#define TAILQ_FOREACH(var, head, field)					\
	for ((var) = TAILQ_FIRST(head); (var) != NULL;			\
	    (var) = TAILQ_NEXT(var, field))
#define TAILQ_PREV(elm, headname, field)				\
	(*(((struct headname *)((elm)->field.tqe_prev))->tqh_last))
#define TAILQ_FOREACH_REVERSE(var, head, headname, field)		\
	for ((var) = TAILQ_LAST(head, headname); (var) != NULL;		\
	    (var) = TAILQ_PREV(var, headname, field))
#define TAILQ_INIT(head) do {						\
	(head)->tqh_first = NULL;					\
	(head)->tqh_last = &(head)->tqh_first;				\
} while (0)
#define TAILQ_INSERT_HEAD(head, elm, field) do {			\
	if (((elm)->field.tqe_next = (head)->tqh_first) != NULL)	\
		(head)->tqh_first->field.tqe_prev =			\
		    &(elm)->field.tqe_next;				\
	else								\
		(head)->tqh_last = &(elm)->field.tqe_next;		\
	(head)->tqh_first = (elm);					\
	(elm)->field.tqe_prev = &(head)->tqh_first;			\
} while (0)
#define TAILQ_INSERT_TAIL(head, elm, field) do {			\
	(elm)->field.tqe_next = NULL;					\
	(elm)->field.tqe_prev = (head)->tqh_last;			\
	*(head)->tqh_last = (elm);					\
	(head)->tqh_last = &(elm)->field.tqe_next;			\
} while (0)
#define TAILQ_REMOVE(head, elm, field) do {				\
	if ((elm)->field.tqe_next != NULL)				\
		(elm)->field.tqe_next->field.tqe_prev =			\
		    (elm)->field.tqe_prev;				\
	else								\
		(head)->tqh_last = (elm)->field.tqe_prev;		\
	*(elm)->field.tqe_prev = (elm)->field.tqe_next;			\
} while (0)
/* Moves every element of head2 to the end of head1; head2 ends empty. */
#define TAILQ_CONCAT(head1, head2, field) do {				\
	if (!TAILQ_EMPTY(head2)) {					\
		*(head1)->tqh_last = (head2)->tqh_first;		\
		(head2)->tqh_first->field.tqe_prev = (head1)->tqh_last;	\
		(head1)->tqh_last = (head2)->tqh_last;			\
		TAILQ_INIT(head2);					\
	}								\
} while (0)

/* A doubly linked list with a head of one pointer. */
#define LIST_HEAD(name, type)						\
struct name {								\
	struct type	*lh_first;					\
}
#define LIST_HEAD_INITIALIZER(head)	{ NULL }
#define LIST_ENTRY(type)						\
struct {								\
	struct type	 *le_next;					\
	struct type	**le_prev;					\
}
#define LIST_FIRST(head)		((head)->lh_first)
#define LIST_NEXT(elm, field)		((elm)->field.le_next)
#define LIST_EMPTY(head)		(LIST_FIRST(head) == NULL)
#define LIST_FOREACH(var, head, field)					\
	for ((var) = LIST_FIRST(head); (var) != NULL;			\
	    (var) = LIST_NEXT(var, field))
#define LIST_INIT(head) do {						\
	(head)->lh_first = NULL;					\
} while (0)
#define LIST_INSERT_HEAD(head, elm, field) do {				\
	if (((elm)->field.le_next = (head)->lh_first) != NULL)		\
		(head)->lh_first->field.le_prev =			\
		    &(elm)->field.le_next;				\
	(head)->lh_first = (elm);					\
	(elm)->field.le_prev = &(head)->lh_first;			\
} while (0)
#define LIST_REMOVE(elm, field) do {					\
	if ((elm)->field.le_next != NULL)				\
		(elm)->field.le_next->field.le_prev =			\
		    (elm)->field.le_prev;				\
	*(elm)->field.le_prev = (elm)->field.le_next;			\
} while (0)

#endif
