"""PyTorch's "Training a classifier" tutorial (CIFAR-10), run by torchlean after changing imports.

The network, loss, optimizer, training loop and the per-class accuracy are the tutorial's. The
data are CIFAR-10-shaped (3x32x32 images, 10 classes) but synthetic, made with torch calls (no
download): each class has a random prototype image and a sample is 0.6 * prototype + noise.
Only the three import lines below differ from the torch program (`import torch`, `import
torch.nn as nn`, `import torch.nn.functional as F`).
"""
import argparse

import torchlean as torch                 # torch: import torch
import torchlean.nn as nn                 # torch: import torch.nn as nn
import torchlean.nn.functional as F       # torch: import torch.nn.functional as F

classes = ('plane', 'car', 'bird', 'cat', 'deer', 'dog', 'frog', 'horse', 'ship', 'truck')


def make_data(n, prototypes):
    labels = torch.randint(0, 10, (n,))
    images = 0.6 * prototypes[labels] + torch.randn(n, 3, 32, 32)
    return torch.utils.data.TensorDataset(images, labels)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)  # flatten all dimensions except batch
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x


def main():
    parser = argparse.ArgumentParser(description="the CIFAR-10 tutorial on synthetic data")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--train-size", type=int, default=4000)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=None, help="stop after this many steps")
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    prototypes = torch.randn(10, 3, 32, 32)
    trainset = make_data(args.train_size, prototypes)
    testset = make_data(1000, prototypes)
    trainloader = torch.utils.data.DataLoader(trainset, batch_size=args.batch_size, shuffle=True)
    testloader = torch.utils.data.DataLoader(testset, batch_size=100, shuffle=False)

    net = Net().to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.001 * args.batch_size / 4, momentum=0.9)

    step = 0
    for epoch in range(args.epochs):  # loop over the dataset multiple times
        running_loss = 0.0
        for i, data in enumerate(trainloader, 0):
            # get the inputs; data is a list of [inputs, labels]
            inputs, labels = data[0].to(device), data[1].to(device)

            # zero the parameter gradients
            optimizer.zero_grad()

            # forward + backward + optimize
            outputs = net(inputs)
            loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()

            # print statistics
            running_loss += loss.item()
            if i % 50 == 49:    # print every 50 mini-batches
                print(f'[{epoch + 1}, {i + 1:5d}] loss: {running_loss / 50:.3f}')
                running_loss = 0.0
            step += 1
            if args.steps is not None and step >= args.steps:
                break
        if args.steps is not None and step >= args.steps:
            break
    print('Finished Training')
    print(f'final training loss: {loss.item():.4f}')

    correct = 0
    total = 0
    correct_pred = {classname: 0 for classname in classes}
    total_pred = {classname: 0 for classname in classes}
    # since we're not training, we don't need to calculate the gradients for our outputs
    with torch.no_grad():
        for data in testloader:
            images, labels = data
            # calculate outputs by running images through the network
            outputs = net(images)
            # the class with the highest energy is what we choose as prediction
            _, predicted = torch.max(outputs.data, 1)
            total += labels.size(0)
            correct += (predicted == labels).sum().item()
            for label, prediction in zip(labels, predicted):
                if label == prediction:
                    correct_pred[classes[label]] += 1
                total_pred[classes[label]] += 1

    for classname, correct_count in correct_pred.items():
        accuracy = 100 * float(correct_count) / max(total_pred[classname], 1)
        print(f'Accuracy for class: {classname:5s} is {accuracy:.1f} %')
    print(f'Accuracy of the network on the 1000 test images: {100 * correct // total} %')


if __name__ == "__main__":
    main()
