"""Generate the sample dataset: short support messages routed to a team.

Writes ``train.csv`` (400 rows) and ``validation.csv`` (100 rows) with columns ``text,label``
and ``predict.csv`` (40 rows, ``text`` only). Labels are ``account``, ``billing``, ``shipping``
and ``technical``, balanced in every file; texts are unique across files, also as an uncased
model reads them (case and final punctuation aside); output is deterministic.

Usage: ``python scripts/make_sample_data.py [--out DIR]`` (default: ``data/sample/``).
"""

from __future__ import annotations

import argparse
import csv
import random
from pathlib import Path

SEED = 1234
LABELS = ("account", "billing", "shipping", "technical")
SIZES = {"train": 100, "validation": 25, "predict": 10}  # rows per label
MIN_WORDS, MAX_WORDS = 6, 25
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "data" / "sample"

OPENERS = ["Hi.", "Hello.", "Hi there.", "Hello team.", "Good morning.", "Hey.", "Hi support."]
CLOSERS = ["Thanks.", "Thank you!", "Please help.", "Any ideas?", "This is urgent.", "Cheers."]
DEVICES = ["iPhone", "Android phone", "iPad", "laptop", "Windows PC", "Mac", "Chromebook"]
BROWSERS = ["Chrome", "Firefox", "Safari", "Edge"]

ISSUES = {
    "account": """I can't log in to my account.
My password reset link says it has expired.
The two-factor code never arrives on my {device}.
I want to change the email address on my profile.
Please delete my account and all of my personal data.
My account got locked after too many login attempts.
How do I change my username?
I think someone else has been signing in to my account.
After merging two accounts I can no longer see my old orders.
How do I add a second user to our company account?
The app keeps telling me that my account does not exist.
I forgot which email address I used to sign up.""",
    "billing": """I was charged twice for order {order}.
My payment was declined but the money still left my bank.
I need a copy of the invoice for last month.
The refund for my returned order has not reached my card yet.
My subscription renewed even though I cancelled it.
The discount code was not applied to my payment at checkout.
I'd like to switch from monthly to yearly billing.
How do I update the credit card you have on file?
The total on my receipt is higher than the price on the website.
The invoice shows the wrong company name and VAT number.
There is an unknown charge of {amount} from you on my statement.
The app charged me for an in-app purchase I did not make.""",
    "shipping": """My order {order} has not arrived yet.
The tracking number you sent me does not work.
The package was delivered to the wrong address.
I need to change the delivery address on my order.
The parcel arrived badly damaged.
One item is missing from the package I received.
The courier marked my order as delivered but nothing came.
How long does express delivery usually take?
My order has been stuck in transit for {days} days.
The app says my order shipped but the tracking page shows nothing.
Can I collect my order from a local store instead?
I received a box with someone else's order inside.""",
    "technical": """The app crashes every time I open it on my {device}.
The website shows an error page when I try to check out.
The page will not load in {browser}.
I get error 500 whenever I upload a file.
The app freezes on the payment screen.
Notifications stopped working after the last update.
Syncing between my phone and my laptop is broken.
The app drains my battery very quickly since the update.
Images do not display on the order history page.
The calendar integration stopped syncing yesterday.
Every API request I send ends in a timeout.
Videos keep buffering and never actually play in {browser}.""",
}

DETAILS = {
    "account": """I already tried resetting my password twice.
My username is the same as my email address.
I have had this account for about {days} years.
The login page just reloads without any message.
I still have access to my old email inbox.
I also tried signing in from my {device}.
My profile page looks completely empty now.""",
    "billing": """The amount was {amount}.
I paid with a Visa card ending in {digits}.
This happened on my last {days} invoices.
My bank confirmed the payment went through.
The order number is {order}, if that helps.
I need this sorted before my accounting closes.""",
    "shipping": """The order number is {order}.
It was supposed to arrive {days} days ago.
The tracking status has not changed since Monday.
I paid for express shipping.
The delivery driver did not leave a note.
I live in a flat with a shared front door.""",
    "technical": """I am using the latest version on my {device}.
I already cleared the cache, then reinstalled it.
It worked fine until {days} days ago.
The same thing happens in {browser}.
My colleagues see the same problem.
The error appears right after the loading spinner.""",
}


def lines(block: str) -> list[str]:
    """Split a template block into one template per line."""
    return block.splitlines()


def fill(template: str, rng: random.Random) -> str:
    """Replace the placeholders of a template with random concrete values."""
    return template.format(
        device=rng.choice(DEVICES),
        browser=rng.choice(BROWSERS),
        order=f"#{rng.randint(10000, 99999)}",
        amount=f"${rng.randint(5, 300)}.{rng.randint(0, 99):02d}",
        digits=f"{rng.randint(0, 9999):04d}",
        days=rng.randint(2, 12),
    )


def compose(label: str, rng: random.Random) -> str:
    """Build one message: optional opener, issue, optional detail, optional closer."""
    parts = []
    if rng.random() < 0.5:
        parts.append(rng.choice(OPENERS))
    parts.append(fill(rng.choice(lines(ISSUES[label])), rng))
    if rng.random() < 0.6:
        parts.append(fill(rng.choice(lines(DETAILS[label])), rng))
    if rng.random() < 0.5:
        parts.append(rng.choice(CLOSERS))
    text = " ".join(parts)
    noise = rng.random()
    if noise < 0.08:
        text = text.lower()
    elif noise < 0.16:
        text = text.rstrip(".!?")
    return text


def reading(text: str) -> str:
    """A text as its near-copies share it: the noise in ``compose`` only lower-cases a text or
    drops its final punctuation, and an uncased model would read such a copy in validation as
    the training row it is."""
    return text.lower().rstrip(".!?")


def generate_texts(label: str, count: int, rng: random.Random, seen: set[str]) -> list[str]:
    """Return ``count`` new texts for ``label`` whose ``reading`` is not already in ``seen``."""
    texts: list[str] = []
    for _ in range(count * 100):
        text = compose(label, rng)
        if reading(text) in seen or not MIN_WORDS <= len(text.split()) <= MAX_WORDS:
            continue
        seen.add(reading(text))
        texts.append(text)
        if len(texts) == count:
            return texts
    raise RuntimeError(f"could not generate {count} unique texts for {label!r}")


def build_splits(seed: int = SEED) -> dict[str, list[tuple[str, str]]]:
    """Create shuffled (text, label) rows for the train, validation and predict splits."""
    rng = random.Random(seed)
    seen: set[str] = set()
    splits: dict[str, list[tuple[str, str]]] = {name: [] for name in SIZES}
    for label in LABELS:
        texts = generate_texts(label, sum(SIZES.values()), rng, seen)
        start = 0
        for name, size in SIZES.items():
            splits[name].extend((text, label) for text in texts[start : start + size])
            start += size
    for rows in splits.values():
        rng.shuffle(rows)
    return splits


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    """Write rows to a UTF-8 CSV file with ``\\n`` line endings."""
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def write_all(out_dir: Path, seed: int = SEED) -> None:
    """Generate all splits and write them as CSV files into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    splits = build_splits(seed)
    for name in ("train", "validation"):
        write_csv(out_dir / f"{name}.csv", ["text", "label"], [list(r) for r in splits[name]])
    write_csv(out_dir / "predict.csv", ["text"], [[text] for text, _ in splits["predict"]])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory")
    args = parser.parse_args(argv)
    write_all(args.out)
    print(f"wrote train.csv, validation.csv and predict.csv to {args.out}")


if __name__ == "__main__":
    main()
