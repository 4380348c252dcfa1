"""Module.__setattr__ of a plain attribute goes through the class's data descriptors, as
torch's (object.__setattr__): a property's setter runs, a read-only property refuses, and
`m.__class__ = Other` changes the class. (Before, the value went into the instance's dict:
the setter never ran, and the property went on reading the old value.)"""

import pytest

import tinyattn as ta


class Tempered(ta.nn.Module):
    def __init__(self):
        super().__init__()
        self._temperature = 1.0
        self.temperature = 2  # through the setter, inside __init__ too

    @property
    def temperature(self):
        return self._temperature

    @temperature.setter
    def temperature(self, value):
        if value <= 0:
            raise ValueError("temperature must be > 0")
        self._temperature = float(value)

    @property
    def read_only(self):
        return 1


def test_a_property_setter_runs_and_checks():
    m = Tempered()
    assert m.temperature == 2.0 and "temperature" not in m.__dict__
    m.temperature = 4
    assert m.temperature == 4.0 and m._temperature == 4.0
    with pytest.raises(ValueError, match="temperature must be > 0"):
        m.temperature = 0


def test_a_read_only_property_refuses_as_in_torch():
    with pytest.raises(AttributeError, match="read_only"):
        Tempered().read_only = 5


def test_assigning_class_changes_the_class():
    class Plain(ta.nn.Module):
        pass

    m = Plain()
    m.__class__ = Tempered
    assert type(m) is Tempered and isinstance(m, Tempered)


def test_plain_attributes_and_registrations_are_unchanged():
    m = Tempered()
    m.p = 0.5
    m.lin = ta.nn.Linear(2, 2)
    assert m.__dict__["p"] == 0.5 and "lin" in dict(m.named_children())
