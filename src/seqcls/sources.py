"""Where a split's rows come from: a local or remote file, or a split of a hub dataset."""

from dataclasses import dataclass

import datasets

from seqcls.errors import ConfigurationError
from seqcls.tables import file_fingerprint, read_table


@dataclass(frozen=True)
class Source:
    """One split's rows. ``flag`` names the option that chose it, for error messages."""

    flag: str
    path: str | None = None
    dataset_name: str | None = None
    dataset_config: str | None = None
    split: str | None = None

    @property
    def label(self) -> str:
        """How error messages and logs name this source."""
        if self.path:
            return self.path
        config = f"/{self.dataset_config}" if self.dataset_config else ""
        return f"{self.dataset_name}{config}[{self.split}]"

    def read(self) -> datasets.Dataset:
        if self.path:
            return read_table(self.path, flag=self.flag)
        return self._load_hub()

    def fingerprint(self) -> str:
        """Changes whenever the rows may have changed."""
        if self.path:
            return file_fingerprint(self.path)
        # datasets fingerprints a loaded split by its files; loading again is a cache hit.
        return f"hub:{self.label}:{self._load_hub()._fingerprint}"

    def _load_hub(self) -> datasets.Dataset:
        try:
            table = datasets.load_dataset(self.dataset_name, self.dataset_config, split=self.split)
        except ValueError as error:  # an unknown split or config
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise ConfigurationError(f"{self.flag}: cannot load {self.label}: {first}") from None
        except (OSError, ConnectionError) as error:
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise ConfigurationError(
                f"{self.flag}: cannot load {self.label}: {first}; without network access, "
                "give local files with --data.train_file and friends"
            ) from None
        if not isinstance(table, datasets.Dataset):
            raise ConfigurationError(f"{self.flag}: {self.label} is not a single split")
        return table
