"""English sentences for people, by key (see lomo/words/__init__.py)."""

WORDS: dict[str, str] = {
    # Routing
    "route.lost": (
        "I could not tell where this message belongs. Please say it again, or write in the "
        "task itself."
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
}
