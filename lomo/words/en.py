"""English sentences for people, by key (see lomo/words/__init__.py)."""

WORDS: dict[str, str] = {
    # Routing
    "route.lost": (
        "I could not tell where this message belongs. Please say it again, or write in the "
        "task itself."
    ),
    "route.okay": "Okay.",
    "route.nothing_to_move": "There is nothing to move.",
    "route.moved": 'Moved to "{goal}".',
    # Cards
    "cards.clarify.which": "Which task do you mean?",
    "cards.clarify.archived": "That task is archived. Reopen it?",
    "cards.clarify.stopped": "That task is stopped. Reopen it?",
    "cards.clarify.new": "Something new",
    # Answers on confirm cards (the checklist, checkpoints)
    "answer.yes": "Yes",
    "answer.no": "No",
    # Presentation
    "present.image": "Here is your image “{name}”.",
    "present.video": "Here is your video “{name}”.",
    "present.audio": "Here is your audio clip “{name}”.",
    "present.3d": "Here is your 3D model “{name}”.",
    "present.many": "Here are your results for “{name}”.",
    # Cancelled jobs (docs/architecture.md#cancelling-a-job)
    "cancel.noun.image": "image",
    "cancel.noun.video": "video",
    "cancel.noun.audio": "audio clip",
    "cancel.noun.3d": "3D model",
    "cancel.cause.moved": "The message this was made for was moved to another task.",
    "cancel.cause.changed": "You changed the request while it was being made.",
    "cancel.free": "Cancelled the {noun} “{name}” before it started: nothing was charged.",
    "cancel.partial": "Cancelled the {noun} “{name}” at {percent} %: {amount} EUR charged "
    "for the part already made.",
    "cancel.finished": "The {noun} “{name}” was finished before it could be cancelled: "
    "{amount} EUR charged, and it is kept with this task's results.",
    # Runtime
    "runtime.checkpoint": "Please confirm: {item}",
    # Flows
    "flow.price": "Flow run: {nodes} paid nodes, {amount} EUR in total",
    "flow.remake": (
        "Re-make {count} of {total} paid nodes for {amount} EUR in total; {kept} kept as they are."
    ),
    "flow.why.new.one": "{nodes} is new.",
    "flow.why.new.many": "{nodes} are new.",
    "flow.why.edited.one": "{nodes} was changed.",
    "flow.why.edited.many": "{nodes} were changed.",
    "flow.why.part.one": "{nodes} shows {name}, whose {detail} changed.",
    "flow.why.part.many": "{nodes} show {name}, whose {detail} changed.",
    "flow.why.document.one": "{nodes} uses all of {name}, which changed.",
    "flow.why.document.many": "{nodes} use all of {name}, which changed.",
    "flow.why.input.one": "{nodes} uses the re-made {detail}.",
    "flow.why.input.many": "{nodes} use the re-made {detail}.",
    "flow.why.stale.one": "{nodes} is out of date.",
    "flow.why.stale.many": "{nodes} are out of date.",
    "flow.why.entry": "entry",
    "flow.and": "and",
    # Money
    "money.price": "{kind} with {model}: {amount} EUR",
    "money.credit": "Add credit: {kind} with {model} costs {amount} EUR, {balance} EUR left",
    "money.budget": "Budget for this plan: {amount} EUR — {purpose}",
    # Memory
    "memory.forget": "Forget {what}, and everything derived from it? This cannot be undone.",
    "memory.forget.text": "“{text}”",
    "memory.forget.memory": "memory {memory_id}",
    "memory.forget.yes": "Forget",
    "memory.forget.no": "Keep",
    # Workspace
    "workspace.delete": (
        "Delete {type} “{name}” and all its {versions} version(s)? This cannot be undone."
    ),
    "workspace.delete.yes": "Delete for good",
    "workspace.delete.no": "Keep",
    # Journal
    "journal.moved": (
        '[Notice, not from the person] The message "{said}" belongs to the task "{goal}" '
        "and was moved there. Do not act on it further here."
    ),
    # Task workflow
    "task.stopped_by_person": "stopped by the person",
    "task.paused_by_person": "paused by the person",
    "task.checklist_done": "every checklist step is done",
    "task.waiting_jobs": "waiting on generation jobs",
    "task.waiting_answer": "waiting on the person's answer",
    "task.checkpoint": "checkpoint {item} needs the person",
    "task.blocked": "blocked: {reason}",
    "task.max_steps": "limit: max_steps_per_turn reached",
    "task.new_messages": "new messages arrived during the turn",
    "task.asked": "the agent asked the person",
    "task.answered": "answered",
    "task.answered_waiting": "answered; waiting for the person",
    "task.progress": "progress made and steps remain",
    "task.no_progress": "limit: no meaningful progress in {turns} turns",
    "task.trying_again": "no progress yet; trying again",
    "task.waiting_credit": "waiting for credit: a paid call needs more balance",
    "task.closed_messages": "task is {status} and takes no messages",
    "task.closed_cards": "task is {status} and takes no card answers",
    "task.closed_pause": "task is {status} and takes no pause",
    "task.already_closed": "task is already {status}",
    "task.stopping_no_resume": "task is being stopped and cannot resume",
    "task.not_paused": "task is {status}, not paused",
    "task.limits_range": "limits must be between 1 and 1000",
    "task.card_not_open": "card {card_id} is not open in this task",
    "task.message_required": "message_id is required",
    "generation.deadline": (
        "The job for “{name}” did not finish within {minutes} minutes, so I stopped "
        "waiting for it. Its charge of {amount} € is back in your credit."
    ),
    "generation.deadline_reason": "the upstream did not finish the job within {minutes} minutes",
    "generation.deadline_free": (
        "The job for “{name}” did not finish within {minutes} minutes, so I stopped waiting for it."
    ),
    # Nudges (docs/architecture.md#nudges)
    "nudge.card": "A question here is still waiting for your answer.",
    "nudge.finished": "The work here is finished and waiting for you to look at it.",
    "nudge.again": "I'll wait {wait} before reminding you again.",
    "nudge.last": "I won't remind you of this again.",
    "nudge.batch.one": "One task is waiting for you: {goals}.",
    "nudge.batch.many": "{count} tasks are waiting for you: {goals}.",
    "duration.second.one": "{n} second",
    "duration.second.many": "{n} seconds",
    "duration.minute.one": "{n} minute",
    "duration.minute.many": "{n} minutes",
    "duration.hour.one": "{n} hour",
    "duration.hour.many": "{n} hours",
    "duration.day.one": "{n} day",
    "duration.day.many": "{n} days",
}
