"""Fixed prompt prefixes (instructions + few-shot examples) of the LLM judge, fact extractor and lesson writer.

Each prefix is the same for every call, so llama.cpp's (and vLLM's) prefix cache evaluates it once
and reuses it; only the pair or turn at the end is new. The examples are written for these prompts
and are not in the labelled sets under ``bench/data/`` (measurement never sees its own few-shots).
Changing a prefix changes measured accuracy: re-run ``hindsight bench judge`` after any edit.
"""

from __future__ import annotations

from typing import Final

JUDGE_SYSTEM: Final = """You maintain a user's long-term memory. You get two statements, OLDER and NEWER (by time). Say what NEWER is to OLDER:
- "update": both are about the SAME attribute of the SAME person or thing, and NEWER makes OLDER no longer true: a new value (job, city, number, date, name, version, plan, preference, habit), a cancellation, a retraction or a correction.
- "refinement": same topic, and NEWER adds detail or a further fact while OLDER stays true.
- "same": NEWER repeats OLDER (a paraphrase, a translation, a confirmation).
- "unrelated": different people, different things or different attributes, even if worded alike (one colleague's birthday vs another's, home address vs office address, one child's school vs another child's).
Answer only JSON: {"relation": "update" | "refinement" | "same" | "unrelated"}."""

JUDGE_SYSTEM_BATCH: Final = (
    JUDGE_SYSTEM.rsplit("\n", 1)[0]
    + '\nYou get several numbered pairs. Answer only JSON with one relation per pair, in order: {"relations": [...]}.'
)

JUDGE_EXAMPLES: Final[tuple[tuple[str, str, str], ...]] = (
    ("I drive a blue Honda Civic.", "Sold the Civic, I ride a Yamaha motorbike to work now.", "update"),
    (
        "My dentist is Dr. Okafor on Elm Street.",
        "Dr. Okafor's practice on Elm Street is where I get my teeth done.",
        "same",
    ),
    ("我女儿在读小学三年级。", "我儿子今年上初一了。", "unrelated"),
    ("We're going to Lisbon in June.", "The Lisbon trip is off, we cancelled it.", "update"),
    ("I play tennis.", "I play tennis every Sunday morning with my brother.", "refinement"),
    ("I like my steak well done.", "I order my steak medium-rare these days.", "update"),
    ("我的车牌号是沪A12345。", "我办公室的座机号是021-5555。", "unrelated"),
    ("我每天喝两杯咖啡。", "医生让我戒咖啡，我现在改喝茶了。", "update"),
    ("Jonas's birthday is on 3 March.", "Priya's birthday is on 14 March.", "unrelated"),
    ("我住在杭州。", "我住在杭州西湖区，离公司很近。", "refinement"),
    ("周末我喜欢宅在家里看书。", "周末我更喜欢出去骑车。", "update"),
    ("My landlord is Mr. Weber.", "Mr. Weber is still our landlord.", "same"),
)
"""(older, newer, relation) few-shot pairs: one per relation kind and both languages."""

FACT_SYSTEM: Final = """You extract durable facts about the user and the people and things in the user's life from one chat turn: preferences, relationships, job, home, health, plans, possessions, habits, important dates. Skip greetings, thanks, filler, questions, small talk, opinions about the chat, and one-off events with no lasting value.
For each fact give:
- entity: who it is about: "user" for the speaker (I, me, my, 我), or "user's <relation>" / a name for others ("user's daughter", "user's colleague Priya");
- attribute: a short lowercase English noun phrase (employer, job title, home city, home address, office address, diet, allergy, budget, birthday, school, partner, pet, favourite food, hobby, plan, ...);
- value: the value as stated;
- statement: one short third-person sentence in the turn's language;
- category: preference, relationship, job, home, health, plan or other;
- negated: true when the turn says it is no longer true, cancelled or retracted.
Answer only JSON: {"facts": [...]} (an empty list when nothing durable is stated)."""

FACT_EXAMPLES: Final[tuple[tuple[str, str], ...]] = (
    (
        "I just started as a nurse at St. Mary's hospital, and I'm vegetarian btw.",
        '{"facts":[{"entity":"user","attribute":"employer","value":"St. Mary\'s hospital","statement":"The user works as a nurse at St. Mary\'s hospital.","category":"job","negated":false},'
        '{"entity":"user","attribute":"diet","value":"vegetarian","statement":"The user is vegetarian.","category":"health","negated":false}]}',
    ),
    ("haha ok, thanks! talk later", '{"facts":[]}'),
    (
        "我们不去成都了，机票已经退了。",
        '{"facts":[{"entity":"user","attribute":"plan","value":"去成都","statement":"用户取消了去成都的计划。","category":"plan","negated":true}]}',
    ),
    (
        "My son Leo goes to Maple Elementary.",
        '{"facts":[{"entity":"user\'s son Leo","attribute":"school","value":"Maple Elementary","statement":"The user\'s son Leo goes to Maple Elementary.","category":"relationship","negated":false}]}',
    ),
    ("你觉得这个方案怎么样？", '{"facts":[]}'),
)
"""(turn, answer JSON) few-shot examples of the fact extractor."""

LESSON_SYSTEM: Final = """A task an assistant did for a user has finished. From the task, its outcome and the user's feedback, write at most 2 short reusable lessons for the next similar task: a user preference ("The user prefers aisle seats.") or a rule ("Confirm the price before ordering."). Write in the feedback's language. Write nothing that is specific to this one task only.
Answer only JSON: {"lessons": [{"text": "...", "kind": "preference" | "do" | "avoid"}]} (an empty list when there is nothing to learn)."""

LESSON_EXAMPLES: Final[tuple[tuple[str, str], ...]] = (
    (
        "Task: book a train to Munich\nOutcome: failure\nFeedback: You booked first class again, I told you I only travel second class.",
        '{"lessons":[{"text":"The user only travels second class on trains.","kind":"preference"}]}',
    ),
    (
        "Task: 总结这篇论文\nOutcome: success\nFeedback: 很好，以后都用中文，一页以内。",
        '{"lessons":[{"text":"总结用中文写，不超过一页。","kind":"preference"}]}',
    ),
    ("Task: set a timer for 10 minutes\nOutcome: success\nFeedback: ", '{"lessons":[]}'),
)
"""(task summary, answer JSON) few-shot examples of the lesson writer."""
